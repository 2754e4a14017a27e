/**
 * A rollout's policy for tests and benchmarks: the run's `policy` section with the schema's own
 * defaults (never restated here), some of it overridden, and the endpoint it calls.
 */
import { ConfigSchema } from '../../src/shared/config/schema.ts';
import { runSettingsFrom, type PolicySettings } from '../../src/shared/config/run-settings.ts';
import type { RolloutPolicy } from '../../src/shared/ports/agent.ts';

/** The policy section of a run produced from an empty configuration, with `overrides` laid over it. */
export function policySettings(overrides: Partial<PolicySettings> = {}): PolicySettings {
  return { ...runSettingsFrom(ConfigSchema.parse({})).policy, ...overrides };
}

/** A rollout's policy: `baseUrl` with `apiKey` (default none) for `model` (default `policy`), the section overridden by `settings`. */
export function rolloutPolicy(baseUrl: string, o: { apiKey?: string | null; model?: string; settings?: Partial<PolicySettings> } = {}): RolloutPolicy {
  return { baseUrl, apiKey: o.apiKey ?? null, model: o.model ?? 'policy', settings: policySettings(o.settings) };
}
