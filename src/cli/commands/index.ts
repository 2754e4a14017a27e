/** Every `vcfleet` command registers itself here, one file each. */
import type { Command } from 'commander';
import { registerPrepare } from './prepare.ts';

export type RegisterCommand = (program: Command) => void;

export const COMMANDS: RegisterCommand[] = [registerPrepare];
