/** The SHA-256 pin of the source parquet: a mismatch is fatal, a missing pin is loudly reported. */
import { DataError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';

/** Anything with a `write(text)`, like process.stderr. */
export interface TextSink {
  write(text: string): unknown;
}

export function pinMismatchMessage(file: string, actual: string, pinned: string, downloaded: boolean): string {
  const refetch = downloaded
    ? `delete ${file} and run prepare again to download it afresh`
    : 'get the pinned file again (or point --parquet / BABYVISION_PARQUET at the right copy)';
  return (
    `parquet file ${file} does not match the pinned SHA-256.\n` +
    `  computed: ${actual}\n` +
    `  pinned (babyvision.sha256): ${pinned}\n` +
    `It is a different revision, a damaged copy or another dataset. Either ${refetch}, ` +
    `or, if you trust this file, pin it with ++babyvision.sha256=${actual}`
  );
}

export function noPinMessage(file: string, actual: string): string {
  return (
    `WARNING: babyvision.sha256 is not set, so ${file} was not checked against a pin. ` +
    `Its SHA-256 is ${actual}; pin it with ++babyvision.sha256=${actual} (or in the config file) ` +
    'so that every later run uses exactly this data.'
  );
}

/**
 * Compare the computed hash with the pin. Throws DataError (both hashes, what to do) on a
 * mismatch; with no pin, warns through the logger and writes one line to `stderr`.
 */
export function checkSourcePin(args: {
  file: string;
  actual: string;
  pinned: string | null;
  downloaded: boolean;
  logger: Logger;
  stderr: TextSink;
}): void {
  const { file, actual, pinned, logger } = args;
  if (pinned === null) {
    logger.warn({ file, sha256: actual }, 'BabyVision parquet SHA-256 is not pinned');
    args.stderr.write(`${noPinMessage(file, actual)}\n`);
    return;
  }
  if (pinned.toLowerCase() !== actual) throw new DataError(pinMismatchMessage(file, actual, pinned, args.downloaded));
  logger.info({ file, sha256: actual }, 'BabyVision parquet matches its SHA-256 pin');
}
