#!/usr/bin/env node
// Entry point: TypeScript sources run through tsx's loader, so there is no build step to forget.
import { register } from 'tsx/esm/api';
register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv);
