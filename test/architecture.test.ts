/**
 * The layout rules the code keeps, checked on every `npm test`: no import circles anywhere in src
 * (type-only imports count too: a circle of types is a circle of concepts), none between the
 * top-level folders of src either, `src/shared` imports no role and nothing outside itself, the
 * roles (producer, sandbox, judge, results) never import each other, the subsystems the roles use
 * (gateway, sandboxes, agent, pacing) import no role and are entered by one front door each
 * (`index.ts`), the rooms of `src/shared` stack in layers, no sandbox provider reads another's folder,
 * no source file is deeper than `src/A/B/file`, and none is over 300 lines. And test/ mirrors src/:
 * `test/<folder>/<file>.test.ts` for `src/<folder>/<file>.ts`, every other test under the folder of
 * the code it drives, the fault and container suites and the helpers apart.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { WORKER_ROLES } from '../src/shared/queue/worker-registry.ts';

const SRC = path.resolve(import.meta.dirname, '../src');
const TEST = path.resolve(import.meta.dirname);
/** Folders of test/ that mirror nothing of src/: the fault suite, the container suite, what tests share, the benchmarks' own arithmetic (test/bench/ mirrors bench/) and the checks of deploy/ (the Helm chart). */
const TEST_APART = ['faults', 'containers', 'helpers', 'bench', 'deploy'];
/** Tests of the repository itself (its layout, docs, images, compose file): at the top of test/. */
const REPO_TESTS = ['architecture.test.ts', 'compose.test.ts', 'docs-links.test.ts', 'docs-walkthroughs.test.ts', 'sandbox-image.test.ts'];
/** The producer, and each stage's role in src/workers/<role>/ (shared/queue/registry.ts names them). */
const ROLES = ['producer', ...WORKER_ROLES.map((role) => `workers/${role}`)];
const SUBSYSTEMS = ['gateway', 'sandboxes', 'agent', 'pacing'];
/** The few files of src/shared every process uses; everything else of src/shared sits in a room. */
const SHARED_FLAT = ['errors.ts', 'logger.ts', 'releasers.ts', 'settle-within.ts'];
/**
 * The rooms of src/shared, bottom up: a room imports the files of its own, of the rooms of the
 * layers below it and the flat files, never one of its own layer or above.
 */
const SHARED_LAYERS = [['config', 'redis', 'scoring', 'text'], ['records'], ['queue'], ['ports', 'stores'], ['output']];
/** The sandbox providers: each folder reads nothing of another. */
const PROVIDER_FOLDERS = ['local', 'docker', 'opensandbox'];
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

  it('keeps src/shared in rooms: no file lies flat in it but the few every process uses', () => {
    const flat = readdirSync(path.join(SRC, 'shared')).filter((f) => f.endsWith('.ts'));
    expect(flat.sort()).toEqual(SHARED_FLAT);
    const rooms = readdirSync(path.join(SRC, 'shared')).filter((f) => statSync(path.join(SRC, 'shared', f)).isDirectory());
    expect(rooms.sort()).toEqual(SHARED_LAYERS.flat().sort());
  });

  it('stacks the rooms of src/shared in layers: no import sideways or back up, and the flat files import only each other', () => {
    const layerOf = (f: string) => SHARED_LAYERS.findIndex((rooms) => rooms.includes(f.split('/')[1]));
    const roomOf = (f: string) => (f.split('/').length === 3 ? f.split('/')[1] : null);
    const wrong = [...graph].flatMap(([from, to]) => {
      if (!from.startsWith('shared/')) return [];
      return to
        .filter((t) => t.startsWith('shared/'))
        .filter((t) => {
          if (roomOf(t) === null) return false; // a flat file: every room may use it
          if (roomOf(from) === null) return true; // a flat file imports no room
          return roomOf(t) !== roomOf(from) && layerOf(t) >= layerOf(from);
        })
        .map((t) => `${from} -> ${t}`);
    });
    expect(wrong).toEqual([]);
  });

  it('gives each subsystem one front door: other folders import only its index.ts', () => {
    const side = [...graph].flatMap(([from, to]) =>
      to.filter((t) => SUBSYSTEMS.includes(t.split('/')[0]) && t.split('/')[0] !== from.split('/')[0] && t !== `${t.split('/')[0]}/index.ts`).map((t) => `${from} -> ${t}`),
    );
    expect(side).toEqual([]);
  });

  it('keeps each sandbox provider folder readable alone: none imports another provider', () => {
    const providerOf = (f: string) => (f.startsWith('sandboxes/') && PROVIDER_FOLDERS.includes(f.split('/')[1]) ? f.split('/')[1] : null);
    const crossings = [...graph].flatMap(([from, to]) => {
      const mine = providerOf(from);
      return mine ? to.filter((t) => providerOf(t) !== null && providerOf(t) !== mine).map((t) => `${from} -> ${t}`) : [];
    });
    const scripts = files(path.join(SRC, 'sandboxes'), /\.ts$/).flatMap((file) => {
      const mine = providerOf(path.relative(SRC, file));
      if (!mine) return [];
      return [...readFileSync(file, 'utf8').matchAll(/new URL\('(\.[^']+)'/g)]
        .map((m) => path.relative(SRC, path.resolve(path.dirname(file), m[1])))
        .filter((t) => providerOf(t) !== null && providerOf(t) !== mine)
        .map((t) => `${path.relative(SRC, file)} -> ${t}`);
    });
    expect([...crossings, ...scripts]).toEqual([]);
  });

  it('has no source file deeper than src/A/B/file', () => {
    const deep = files(SRC, /\.(ts|py)$/).map((f) => path.relative(SRC, f)).filter((f) => f.split('/').length > 3);
    expect(deep).toEqual([]);
  });

  it('mirrors src in test/: each test sits under the folder of the code it tests, named after its file where it tests one', () => {
    const homes = new Map<string, string[]>();
    for (const file of files(SRC)) {
      const rel = path.relative(SRC, file);
      homes.set(path.basename(rel, '.ts'), [...(homes.get(path.basename(rel, '.ts')) ?? []), path.dirname(rel)]);
    }
    const misplaced = files(TEST, /\.ts$/).flatMap((file) => {
      const rel = path.relative(TEST, file);
      const dir = path.dirname(rel);
      if (TEST_APART.includes(rel.split('/')[0])) return [];
      if (!rel.endsWith('.test.ts')) return [`${rel}: what tests share lives in test/helpers/`];
      if (dir === '.') return REPO_TESTS.includes(rel) ? [] : [`${rel}: only tests of the repository itself sit at the top of test/`];
      if (!existsSync(path.join(SRC, dir))) return [`${rel}: test/${dir}/ mirrors no folder of src/`];
      const named = homes.get(path.basename(rel, '.test.ts'));
      return named && !named.includes(dir) ? [`${rel}: tests src/${named[0]}/${path.basename(rel, '.test.ts')}.ts, so it belongs in test/${named[0]}/`] : [];
    });
    expect(misplaced).toEqual([]);
  });

  it(`has no source file over ${MAX_LINES} lines`, () => {
    const long = files(SRC, /\.(ts|py)$/)
      .map((f) => ({ file: path.relative(SRC, f), lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.file}: ${f.lines}`);
    expect(long).toEqual([]);
  });
});
