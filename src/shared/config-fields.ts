/** Field types the config sections share. */
import { z } from 'zod';

export const positiveInt = z.number().int().positive();
export const nullableString = z.string().nullable().default(null);
/** A switch that may come from an environment variable: true/false, or 1/0. */
export const envFlag = z.union([z.boolean(), z.literal(0), z.literal(1)]).transform((v) => v === true || v === 1);
