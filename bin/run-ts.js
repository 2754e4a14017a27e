#!/usr/bin/env node
// Runs one TypeScript file through tsx's loader (no build step): `node bin/run-ts.js bench/run.ts --only 1,3`.
// The script sees its own arguments from process.argv[2] on, as if it had been started directly.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { register } from 'tsx/esm/api';

const file = process.argv[2];
if (!file) {
  console.error('usage: node bin/run-ts.js <file.ts> [args...]');
  process.exit(2);
}
register();
process.argv.splice(1, 1);
await import(pathToFileURL(path.resolve(file)).href);
