/**
 * The viewer's client code: TypeScript under `client/`, bundled into one ES module by esbuild from
 * node_modules the first time it is asked for (about 0.1 s), then kept in memory. Nothing is fetched
 * at run time and nothing is written to disk; the style sheet is served as it is.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const CLIENT_ENTRY = fileURLToPath(new URL('./client/main.ts', import.meta.url));
const CLIENT_CSS = fileURLToPath(new URL('./client/viewer.css', import.meta.url));

export interface ClientAssets {
  script: string;
  css: string;
}

let assets: Promise<ClientAssets> | undefined;

async function bundle(): Promise<ClientAssets> {
  const result = await build({
    entryPoints: [CLIENT_ENTRY],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    minify: false,
    legalComments: 'none',
    logLevel: 'silent',
  });
  return { script: result.outputFiles[0].text, css: await readFile(CLIENT_CSS, 'utf8') };
}

/** The bundled client script and style sheet (built once per process; a failed build is retried on the next call). */
export function clientAssets(): Promise<ClientAssets> {
  assets ??= bundle().catch((err: unknown) => {
    assets = undefined;
    throw new Error(`cannot bundle the viewer's client code (${CLIENT_ENTRY}): ${(err as Error).message}`);
  });
  return assets;
}
