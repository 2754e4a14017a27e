/**
 * The rollout table's filter and order (client code, pure): the URL query round-trips, each filter
 * keeps exactly its rows, and the order is the one previous/next follow on the rollout page.
 */
import { describe, expect, it } from 'vitest';
import { applyFilter, DEFAULT_FILTER, filterFromQuery, filterToQuery } from '../../../src/viewer/client/table-filter.ts';
import { writeViewerFixture } from '../../helpers/viewer-fixture.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

const f = writeViewerFixture(createTmpDir(), [{ runId: 'r', rollouts: [
  { task_id: '10', repeat: 0, type: 'A', subtype: 'a', outcome: 'correct', wall_s: 3 },
  { task_id: '9', repeat: 1, type: 'A', subtype: 'a', outcome: 'wrong', wall_s: 50 },
  { task_id: '9', repeat: 0, type: 'B', subtype: 'b', outcome: 'timeout', wall_s: 1800 },
  { task_id: '11', repeat: 0, type: 'B', subtype: 'b', outcome: 'judge_failed', script: 'hostile', wall_s: 7 },
  { task_id: '12', repeat: 0, type: 'B', subtype: 'c', outcome: 'infra_failed', wall_s: 0 },
] }]);
removeTmpDirs();
const ids = (q: string) => applyFilter(f.rows, filterFromQuery(q)).map((r) => `${r.task_id}-${r.repeat}`);

describe('table filter', () => {
  it('round-trips through the URL query and drops defaults and junk', () => {
    const q = 'type=B&reward=0&stop=timeout&masked=no&repeat=0&q=x+y&sort=wall_s&dir=desc&page=3';
    const parsed = filterFromQuery(q);
    expect(parsed).toEqual({ type: 'B', subtype: '', reward: '0', stop: 'timeout', masked: 'no', repeat: '0', q: 'x y', sort: 'wall_s', dir: 'desc', page: 3 });
    expect(filterFromQuery(filterToQuery(parsed))).toEqual(parsed);
    expect(filterToQuery(parsed, false)).not.toContain('page');
    expect(filterFromQuery('reward=2&sort=rm+-rf&dir=sideways&page=-1')).toEqual(DEFAULT_FILTER);
    expect(filterToQuery(DEFAULT_FILTER)).toBe('');
  });

  it('orders task ids as numbers, then by repeat', () => {
    expect(ids('')).toEqual(['9-0', '9-1', '10-0', '11-0', '12-0']);
    expect(ids('sort=wall_s&dir=desc')).toEqual(['9-0', '9-1', '11-0', '10-0', '12-0']);
    // Masked rows sort below 0 by reward.
    expect(ids('sort=reward')).toEqual(['11-0', '12-0', '9-0', '9-1', '10-0']);
  });

  it('keeps exactly the rows each filter names', () => {
    expect(ids('reward=1')).toEqual(['10-0']);
    expect(ids('reward=0')).toEqual(['9-0', '9-1']);
    expect(ids('reward=masked')).toEqual(['11-0', '12-0']);
    expect(ids('masked=judge_failed')).toEqual(['11-0']);
    expect(ids('masked=no&type=B')).toEqual(['9-0']);
    expect(ids('stop=none')).toEqual(['12-0']);
    expect(ids('subtype=c')).toEqual(['12-0']);
    expect(ids('repeat=1')).toEqual(['9-1']);
  });

  it('searches extracted answers and task ids, case-insensitively', () => {
    expect(ids('q=ONERROR')).toEqual(['11-0']);
    expect(ids('q=12')).toEqual(['12-0']);
    expect(ids('q=zzz')).toEqual([]);
  });
});
