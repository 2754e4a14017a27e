/** Field types the config sections share, and the mark that makes a config key a run setting. */
import { z } from 'zod';

export const positiveInt = z.number().int().positive();
export const nullableString = z.string().nullable().default(null);
/** A switch that may come from an environment variable: true/false, or 1/0. */
export const envFlag = z.union([z.boolean(), z.literal(0), z.literal(1)]).transform((v) => v === true || v === 1);

/** How a run setting is kept in the run record (run-settings.ts reads the marks). */
export interface RunSettingMeta {
  /** It makes the run's rollouts (benchmark, limit, num_repeats): `vcfleet run-set` refuses to change it. */
  fixed: boolean;
  /** A URL: the run stores it without user name and password. */
  withoutCredentials: boolean;
}

/** The run settings among the config's fields, with how each is kept. */
export const RUN_SETTING_MARKS = z.registry<RunSettingMeta>();

declare const RUN_SETTING: unique symbol;
/** A config field marked with `runSetting` (the type-level side of the mark, for `RunSettingsOf`). */
export type RunSettingField = { readonly [RUN_SETTING]?: true };

/**
 * Mark a config field as a run setting: `produce` freezes its value into the run record under the
 * same key, and every worker serving the run reads it from there, not from its own configuration.
 * The mark is on a copy, so a shared field type (`positiveInt`) is never marked everywhere it is used.
 */
export function runSetting<T extends z.ZodType>(field: T, meta: Partial<RunSettingMeta> = {}): T & RunSettingField {
  const marked = field.clone();
  // Every flag spelt out: zod's registry reads an empty meta of a copy as no meta at all.
  RUN_SETTING_MARKS.add(marked, { fixed: meta.fixed ?? false, withoutCredentials: meta.withoutCredentials ?? false });
  return marked as T & RunSettingField;
}

type Unwrapped<S> = S extends z.ZodDefault<infer Inner> | z.ZodPrefault<infer Inner> ? Unwrapped<Inner> : S;
type IsRunSetting<S> = typeof RUN_SETTING extends keyof S ? true : false;
type HoldsRunSettings<S> = IsRunSetting<S> extends true
  ? true
  : Unwrapped<S> extends z.ZodObject<infer Shape, z.core.$strict | z.core.$strip | z.core.$loose>
    ? true extends { [K in keyof Shape]: HoldsRunSettings<Shape[K]> }[keyof Shape] ? true : false
    : false;

/** The part of an object schema's output that is run settings: its marked fields, sections keeping only theirs. */
export type RunSettingsOf<S> = IsRunSetting<S> extends true
  ? z.output<S>
  : Unwrapped<S> extends z.ZodObject<infer Shape, z.core.$strict | z.core.$strip | z.core.$loose>
    ? { [K in keyof Shape as HoldsRunSettings<Shape[K]> extends true ? K : never]: RunSettingsOf<Shape[K]> }
    : never;
