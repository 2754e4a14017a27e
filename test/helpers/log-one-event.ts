/** A process that logs one large warning with the default logger (for the logger's test: what piped stderr gets). */
import { createLogger } from '../../src/shared/logger.ts';

const logger = createLogger({ json: process.env.VCFLEET_LOG_JSON === '1' });
logger.warn({ role: 'results', rollout_id: 'r-1', detail: 'x'.repeat(900), nested: { a: 1, text: 'y'.repeat(300) } }, 'the judge call failed; retrying');
logger.flush();
