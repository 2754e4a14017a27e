/** Every `vcfleet` command registers itself here, one file each. */
import type { Command } from 'commander';
import type { Cli } from '../context.ts';
import { registerPrepare } from './prepare.ts';
import { registerProduce } from './produce.ts';
import { registerWorker } from './worker.ts';
import { registerRun } from './run.ts';
import { registerOps } from './status.ts';
import { registerRequeue } from './retry-rejudge.ts';
import { registerMetrics } from './metrics.ts';
import { registerExport } from './export.ts';
import { registerDashboard } from './dashboard.ts';
import { registerServe } from './serve.ts';
import { registerDemo } from './demo.ts';
import { registerView } from './view.ts';
import { registerRuns } from './runs.ts';
import { registerCompare } from './compare.ts';
import { registerFleetSet, registerRunSet } from './run-set.ts';
import { registerStandIn } from './stand-in.ts';

export type RegisterCommand = (program: Command, cli: Cli) => void;

export const COMMANDS: RegisterCommand[] = [registerDemo, registerPrepare, registerRun, registerProduce, registerWorker, registerOps, registerRequeue, registerRunSet, registerFleetSet, registerRuns, registerMetrics, registerCompare, registerExport, registerDashboard, registerServe, registerView, registerStandIn];
