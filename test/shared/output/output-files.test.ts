/**
 * The files beside an output JSONL (shared/output/output-files.ts): the fleet's metrics under their own
 * name, NeMo Gym's names for its files, and an older run's fleet metrics (under NeMo Gym's name) still
 * read, while NeMo Gym's list under that name is never taken for the fleet's.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fleetMetricsToRead, outputFiles } from '../../../src/shared/output/output-files.ts';
import { metricsPathFor } from '../../../src/shared/output/metrics.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

describe('output files', () => {
  afterAll(() => removeTmpDirs());

  it('names each file from the stem, the fleet metrics apart from NeMo Gym', () => {
    expect(outputFiles('/r/bv.jsonl')).toEqual({
      fleetMetrics: '/r/bv_fleet_metrics.json', gymMetrics: '/r/bv_aggregate_metrics.json', failures: '/r/bv_failures.jsonl', materializedInputs: '/r/bv_materialized_inputs.jsonl',
    });
    expect(metricsPathFor('/r/bv.jsonl')).toBe('/r/bv_fleet_metrics.json');
  });

  it("reads an older run's fleet metrics under the old name, never NeMo Gym's list, and the new name first", () => {
    const dir = createTmpDir('vcfleet-output-files-');
    const jsonl = path.join(dir, 'old.jsonl');
    const files = outputFiles(jsonl);
    expect(fleetMetricsToRead(jsonl)).toBe(files.fleetMetrics);
    writeFileSync(files.gymMetrics, JSON.stringify({ run_id: 'old', num_repeats: 3 }));
    expect(fleetMetricsToRead(jsonl)).toBe(files.gymMetrics);
    writeFileSync(files.gymMetrics, JSON.stringify([{ agent_ref: { name: 'a' }, agent_metrics: {}, key_metrics: {}, group_level_metrics: [] }]));
    expect(fleetMetricsToRead(jsonl)).toBe(files.fleetMetrics);
    writeFileSync(files.gymMetrics, JSON.stringify({ run_id: 'old' }));
    writeFileSync(files.fleetMetrics, JSON.stringify({ run_id: 'new' }));
    expect(fleetMetricsToRead(jsonl)).toBe(files.fleetMetrics);
  });
});
