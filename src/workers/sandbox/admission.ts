/**
 * Admission by memory: a sandbox-worker runs as many sessions as its host's memory holds, and never
 * starts one that would not fit. `queues.rollout_concurrency: auto` sets its slots from the memory
 * this worker may use (the host's, or a smaller cgroup limit above it) less `queues.memory_reserve_mib`,
 * one slot per `sandbox_config.resources.memory_mib` (the limit the box enforces on each sandbox).
 * Before each session it checks that there is still room for one more sandbox at its limit, and
 * that the kernel is not stalling on memory; when not, the worker stops taking rollouts (the job
 * goes back to the queue, its attempt kept) until a session ends and room is back. It says so once
 * per hold: in the log, to the progress line and to the Prometheus metrics (`onChange`).
 */
import type { Config } from '../../shared/config/schema.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { readHostMemory, type HostMemory } from './host-memory.ts';
import { watchV1Pressure, type PressureWatch } from './v1-pressure.ts';

import type { AdmissionState } from '../../shared/ports/telemetry.ts';

/** What the worker is paused and resumed through (a BullMQ Worker). */
export interface Pausable {
  pause(doNotWaitActive?: boolean): Promise<void>;
  resume(): void;
}

const mib = (n: number) => `${Math.round(n).toLocaleString('en-US')} MiB`;

/** The slots of `auto`: sandboxes at their memory limit that fit in what this worker may use, less the reserve. */
export function autoSlots(memory: Pick<HostMemory, 'totalMib'>, sandboxMib: number, reserveMib: number): number {
  return Math.floor((memory.totalMib - reserveMib) / sandboxMib);
}

export class MemoryAdmission {
  private readonly sandboxMib: number;
  private readonly reserveMib: number;
  private readonly pressureMax: number;
  private readonly provider: string;
  /** Sandboxes on this host (the provider says so): remote ones live elsewhere and this host's memory does not bound them. */
  private readonly local: boolean;
  private state: AdmissionState = { slots: 0, held: null, holds: 0 };
  private timer: NodeJS.Timeout | undefined;
  private target: Pausable | undefined;
  /** The worker's own v1 pressure (started the first time its cgroup turns out to be v1), or null. */
  private v1: Promise<PressureWatch | null> | null = null;
  private v1Watch: PressureWatch | null = null;
  private readonly read: () => Promise<HostMemory>;

  /** `usesHostMemory`: the runner's sessions run on this host (AgentRunner.host). */
  constructor(
    config: Config,
    usesHostMemory: boolean,
    private readonly logger: Logger,
    private readonly onChange: (state: AdmissionState) => void = () => {},
    read?: () => Promise<HostMemory>,
    private readonly pollMs = 2000,
  ) {
    this.read = read ?? (() => readHostMemory(undefined, (folder) => this.v1Pressure(folder)));
    this.sandboxMib = config.sandbox_config.resources.memory_mib;
    this.reserveMib = config.queues.memory_reserve_mib;
    this.pressureMax = config.queues.memory_pressure_max_pct;
    this.local = usesHostMemory;
    this.provider = config.sandbox_provider;
  }

  get current(): AdmissionState {
    return { ...this.state };
  }

  /** The worker's slots: the configured number, or what `auto` finds this host holds (at least one, else an error that says what to change). */
  async slots(configured: number | 'auto'): Promise<number> {
    let slots = typeof configured === 'number' ? configured : 0;
    if (configured === 'auto') {
      if (!this.local) {
        throw new ConfigError(
          `queues.rollout_concurrency=auto counts this host's memory against its sandboxes, but sandbox_provider=${this.provider} runs them elsewhere: set a number of rollouts for this worker`,
        );
      }
      const memory = await this.read();
      slots = autoSlots(memory, this.sandboxMib, this.reserveMib);
      if (slots < 1) {
        throw new ConfigError(
          `queues.rollout_concurrency=auto: ${memory.source} has ${mib(memory.totalMib)}, not enough for one sandbox of ${mib(this.sandboxMib)} ` +
            `(sandbox_config.resources.memory_mib) plus the ${mib(this.reserveMib)} reserve (queues.memory_reserve_mib): lower either, or run this worker on a larger host`,
        );
      }
      this.logger.info({ slots, memory_mib: Math.round(memory.totalMib), source: memory.source, sandbox_mib: this.sandboxMib, reserve_mib: this.reserveMib }, `rollout slots: ${slots} (auto, by memory)`);
    }
    this.set({ slots });
    return slots;
  }

  /** Why a new session would not fit now, or null when it fits (always, for sandboxes on another host). */
  async refusal(): Promise<string | null> {
    if (!this.local) return null;
    const m = await this.read();
    if (m.availableMib - this.reserveMib < this.sandboxMib) {
      return `${mib(m.availableMib)} of memory free in ${m.source}; a sandbox may use ${mib(this.sandboxMib)} (sandbox_config.resources.memory_mib) and ${mib(this.reserveMib)} stay reserved (queues.memory_reserve_mib)`;
    }
    if (m.pressurePct !== null && m.pressurePct > this.pressureMax) {
      return `the kernel stalled on memory ${m.pressurePct.toFixed(1)}% of the last 10 s (more than queues.memory_pressure_max_pct=${this.pressureMax})`;
    }
    return null;
  }

  /**
   * Stop taking rollouts for `reason` (pausing `worker`), and take them again once a check finds room:
   * after every session that ends (`sessionEnded`) and every poll. Said once per hold.
   */
  hold(worker: Pausable, reason: string): void {
    this.target = worker;
    if (this.state.held !== null) return;
    this.set({ held: reason, holds: this.state.holds + 1 });
    this.logger.warn({ reason }, `not taking rollouts: ${reason}; waiting for a session to end or memory to free`);
    void worker.pause(true);
    this.timer = setInterval(() => void this.recheck(), this.pollMs);
    this.timer.unref();
  }

  /** A session ended: room may be back. */
  sessionEnded(): void {
    if (this.state.held !== null) void this.recheck();
  }

  stop(): void {
    clearInterval(this.timer);
    this.v1Watch?.stop();
    void this.v1?.then((w) => w?.stop());
  }

  /** The worker's own pressure on cgroup v1 (null until its watch runs, or when it cannot). */
  private v1Pressure(folder: string): number | null {
    this.v1 ??= watchV1Pressure(folder, this.logger).then((w) => (this.v1Watch = w));
    return this.v1Watch?.pct() ?? null;
  }

  private async recheck(): Promise<void> {
    if (this.state.held === null) return;
    const still = await this.refusal().catch(() => this.state.held);
    if (still !== null || this.state.held === null) return;
    clearInterval(this.timer);
    this.set({ held: null });
    this.logger.info('taking rollouts again: memory is free');
    this.target?.resume();
  }

  private set(change: Partial<AdmissionState>): void {
    this.state = { ...this.state, ...change };
    this.onChange(this.current);
  }
}
