/** Every `vcfleet` command registers itself here, one file each. */
import type { Command } from 'commander';

export type RegisterCommand = (program: Command) => void;

export const COMMANDS: RegisterCommand[] = [];
