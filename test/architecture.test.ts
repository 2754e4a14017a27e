/**
 * The layout rules the code keeps, checked on every `npm test`: no import circles anywhere in src
 * (type-only imports count too: a circle of types is a circle of concepts), none between the
 * top-level folders of src either, `src/shared` imports no role and nothing outside itself, the
 * roles (producer, sandbox, judge, results) never import each other, the subsystems the roles use
 * (gateway, sandboxes, agent, pacing) import no role, no source file is deeper than `src/A/B/file`,
 * and none is over 300 lines.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { WORKER_ROLES } from '../src/shared/queue/worker-registry.ts';

const SRC = path.resolve(import.meta.dirname, '../src');
/** The producer, and each stage's role in src/workers/<role>/ (shared/queue/registry.ts names them). */
const ROLES = ['producer', ...WORKER_ROLES.map((role) => `workers/${role}`)];
const SUBSYSTEMS = ['gateway', 'sandboxes', 'agent', 'pacing'];
/** Longest source file, in lines. */
const MAX_LINES = 300;

function files(dir: string, ext = /\.ts$/): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? files(p, ext) : ext.test(p) ? [p] : [];
  });
}

/** Every file's relative imports (import, import type, export ... from), resolved, within src. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files(SRC)) {
    const text = readFileSync(file, 'utf8');
    const specs = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'(\.[^']+)'/gm), ...text.matchAll(/^\s*import\s+'(\.[^']+)'/gm)].map((m) => m[1]);
    graph.set(path.relative(SRC, file), specs.map((s) => path.relative(SRC, path.resolve(path.dirname(file), s))).filter((t) => !t.startsWith('..')));
  }
  return graph;
}

/** The import circles of `graph`, each as a path that starts and ends at the same file (Tarjan's strongly connected components). */
function circles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const on = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.reverse());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

describe('the layout of src', () => {
  const graph = importGraph();

  it('has no import circle', () => {
    expect(graph.size).toBeGreaterThan(150); // every file of src was read
    expect([...graph.values()].flat().length).toBeGreaterThan(500);
    expect(circles(graph)).toEqual([]);
  });

  it('has no circle between the top-level folders of src either (a folder imports another only one way)', () => {
    const folder = (f: string) => f.split('/')[0].replace(/\.ts$/, '');
    const folders = new Map<string, string[]>();
    for (const [from, to] of graph) {
      const edges = folders.get(folder(from)) ?? [];
      for (const t of to) if (folder(t) !== folder(from) && !edges.includes(folder(t))) edges.push(folder(t));
      folders.set(folder(from), edges);
    }
    expect(circles(folders)).toEqual([]);
  });

  it('keeps src/shared free of everything else', () => {
    const leaks = [...graph].flatMap(([from, to]) => (from.startsWith('shared/') ? to.filter((t) => !t.startsWith('shared/')).map((t) => `${from} -> ${t}`) : []));
    expect(leaks).toEqual([]);
  });

  it('lets no role import another role', () => {
    const roleOf = (f: string) => ROLES.find((r) => f === `${r}.ts` || f.startsWith(`${r}/`));
    const crossings = [...graph].flatMap(([from, to]) => {
      const mine = roleOf(from);
      return mine ? to.filter((t) => roleOf(t) !== undefined && roleOf(t) !== mine).map((t) => `${from} -> ${t}`) : [];
    });
    expect(crossings).toEqual([]);
  });

  it('keeps the subsystems below the roles: gateway, sandboxes, agent and pacing import no role', () => {
    const roleOf = (f: string) => ROLES.find((r) => f === `${r}.ts` || f.startsWith(`${r}/`));
    const up = [...graph].flatMap(([from, to]) => (SUBSYSTEMS.includes(from.split('/')[0]) ? to.filter((t) => roleOf(t) !== undefined || t.startsWith('workers/')).map((t) => `${from} -> ${t}`) : []));
    expect(up).toEqual([]);
  });

  it('has no source file deeper than src/A/B/file', () => {
    const deep = files(SRC, /\.(ts|py)$/).map((f) => path.relative(SRC, f)).filter((f) => f.split('/').length > 3);
    expect(deep).toEqual([]);
  });

  it(`has no source file over ${MAX_LINES} lines`, () => {
    const long = files(SRC, /\.(ts|py)$/)
      .map((f) => ({ file: path.relative(SRC, f), lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.file}: ${f.lines}`);
    expect(long).toEqual([]);
  });
});
