/**
 * The key paths the config schema accepts, read off the zod schema itself (so a new key is known the
 * moment it is added), and the nearest of them to a misspelt key, for "did you mean" in config errors.
 */
import { z } from 'zod';
import { ConfigSchema } from './schema.ts';

/** The schema under defaults, nullables, optionals and transforms: what the value is checked against. */
function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    if (s instanceof z.ZodDefault || s instanceof z.ZodPrefault || s instanceof z.ZodNullable || s instanceof z.ZodOptional) s = s.unwrap() as z.ZodType;
    else if (s instanceof z.ZodPipe) s = s.in as z.ZodType;
    else return s;
  }
}

/** Every dotted key path of an object schema, parents included (`judge`, `judge.rate_limit_per_s`), in schema order. */
function keyPaths(schema: z.ZodType, prefix = ''): string[] {
  const object = unwrap(schema);
  if (!(object instanceof z.ZodObject)) return [];
  return Object.entries(object.shape as Record<string, z.ZodType>).flatMap(([key, value]) => {
    const at = prefix ? `${prefix}.${key}` : key;
    return [at, ...keyPaths(value, at)];
  });
}

let configPaths: string[] | undefined;

/** Every key path of the run configuration (`ConfigSchema`). */
export function configKeyPaths(): string[] {
  configPaths ??= keyPaths(ConfigSchema);
  return configPaths;
}

/**
 * Edit distance where inserting, deleting or replacing a character, or swapping two neighbours, costs
 * one (optimal string alignment: `polciy` is one swap from `policy`).
 */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The known key nearest to an unknown dotted `key`, when it is close enough to be a typo of it: at
 * most 2 edits, or at most a third of the length of the key's last part (the part the schema did not
 * know; its parents are known). Null when nothing is that close. Ties go to the first in schema order.
 */
export function nearestKey(key: string, known: readonly string[] = configKeyPaths()): string | null {
  const last = key.slice(key.lastIndexOf('.') + 1);
  const allowed = Math.max(2, Math.floor(last.length / 3));
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(key, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return bestDistance > 0 && bestDistance <= allowed && bestDistance < key.length ? best : null;
}
