/**
 * The README and the pages of docs/ link to each other and to files of the repository: every
 * relative Markdown link `[text](target)` (images too) must name a file that exists, and an anchor
 * (`page.md#anchor`, or `#anchor` within the same page) must be a heading of that page, by GitHub's
 * heading slugs. Also keeps the README a front page (at most 300 lines) with the rest in docs/.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const DOCS = path.join(ROOT, 'docs');
/** Longest README, in lines. */
const MAX_README_LINES = 300;
/** Fewest pages in docs/, its index (docs/README.md) not counted. */
const MIN_DOC_PAGES = 5;

/** The Markdown files checked: README.md and every docs/*.md, as paths relative to the repository. */
function markdownFiles(): string[] {
  const docs = readdirSync(DOCS).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

/** The text with fenced code blocks blanked out (their lines kept, so line numbers still hold). */
function withoutFences(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence === null && open) {
      fence = open[1];
      return '';
    }
    if (fence !== null) {
      if (line.trim().startsWith(fence)) fence = null;
      return '';
    }
    return line;
  });
}

/** GitHub's anchor of a heading: the text as rendered, lower case, punctuation but hyphens (and underscores) dropped, spaces to hyphens. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link or an image: its text
    .replace(/<[^>]+>/g, '') // inline HTML tags
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}_\- ]/gu, '').replace(/ /g, '-');
}

/** Every anchor the headings of a Markdown file give, duplicates numbered as GitHub does (`x`, `x-1`, `x-2`). */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of withoutFences(text)) {
    const m = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

interface Link {
  file: string;
  line: number;
  target: string;
}

/** Every Markdown link and image of the text outside code (fenced blocks and `inline code`), with its line. */
function links(file: string, text: string): Link[] {
  const out: Link[] = [];
  withoutFences(text).forEach((raw, i) => {
    const line = raw.replace(/(`+)[^`]*?\1/g, ''); // inline code spans
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ file, line: i + 1, target: m[1] });
    }
  });
  return out;
}

/** Why a relative link is broken, or null when it resolves. External links (any URL scheme) are not checked. */
function brokenReason(link: Link, read: (file: string) => string | null): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) return null; // http:, https:, mailto:, ...
  const hash = link.target.indexOf('#');
  const rawPath = hash === -1 ? link.target : link.target.slice(0, hash);
  const anchor = hash === -1 ? null : decodeURIComponent(link.target.slice(hash + 1));
  const targetFile = rawPath === '' ? link.file : path.posix.normalize(path.posix.join(path.posix.dirname(link.file), decodeURIComponent(rawPath)));
  if (targetFile.startsWith('../')) return `points outside the repository (${targetFile})`;
  if (rawPath !== '' && !existsSync(path.join(ROOT, targetFile))) return `no such file: ${targetFile}`;
  if (anchor === null || anchor === '') return null;
  if (!targetFile.endsWith('.md')) return `an anchor into a file that is not Markdown (${targetFile})`;
  const text = read(targetFile);
  if (text === null) return `cannot read ${targetFile}`;
  return anchors(text).has(anchor) ? null : `no heading #${anchor} in ${targetFile}`;
}

function readRepoFile(file: string): string | null {
  try {
    return readFileSync(path.join(ROOT, file), 'utf8');
  } catch {
    return null;
  }
}

describe('the README and docs/', () => {
  const files = markdownFiles();
  const all = files.flatMap((f) => links(f, readRepoFile(f) ?? ''));

  it('reads the links of every page', () => {
    expect(files.length).toBeGreaterThan(1);
    expect(all.length).toBeGreaterThan(20); // the extraction found the links at all
  });

  it('has no broken relative link or anchor', () => {
    const broken = all.flatMap((l) => {
      const why = brokenReason(l, readRepoFile);
      return why ? [`${l.file}:${l.line}: (${l.target}) ${why}`] : [];
    });
    expect(broken, `broken links:\n${broken.join('\n')}`).toEqual([]);
  });

  it(`keeps README.md a front page of at most ${MAX_README_LINES} lines`, () => {
    const lines = (readRepoFile('README.md') ?? '').replace(/\n$/, '').split('\n').length;
    expect(lines).toBeLessThanOrEqual(MAX_README_LINES);
  });

  it(`has at least ${MIN_DOC_PAGES} pages in docs/, each linked from its index docs/README.md`, () => {
    const pages = files.filter((f) => f.startsWith('docs/') && f !== 'docs/README.md');
    expect(pages.length).toBeGreaterThanOrEqual(MIN_DOC_PAGES);
    const indexed = new Set(links('docs/README.md', readRepoFile('docs/README.md') ?? '').map((l) => path.posix.join('docs', l.target.split('#')[0])));
    expect(pages.filter((p) => !indexed.has(p))).toEqual([]);
  });
});

describe('the link checker itself', () => {
  it('slugs headings as GitHub does', () => {
    expect(slug('Redis that fails over (Sentinel, Cluster, managed endpoints)')).toBe('redis-that-fails-over-sentinel-cluster-managed-endpoints');
    expect(slug('Exporting for a trainer (`vcfleet export`)')).toBe('exporting-for-a-trainer-vcfleet-export');
    expect(slug('Set-up')).toBe('set-up');
    expect([...anchors('# A\n## A\n```\n# not a heading\n```\n## B: c/d\n')]).toEqual(['a', 'a-1', 'b-cd']);
  });

  it('finds links outside code only, and names a broken file or anchor', () => {
    const text = 'see [x](missing.md) and [y](#nope), `[z](ignored.md)`\n```\n[w](in-fence.md)\n```\n![pic](viewer-run.png) [ok](#a-heading)\n# A heading\n';
    const found = links('docs/page.md', text);
    expect(found.map((l) => l.target)).toEqual(['missing.md', '#nope', 'viewer-run.png', '#a-heading']);
    const read = (f: string) => (f === 'docs/page.md' ? text : null);
    expect(found.map((l) => brokenReason(l, read))).toEqual(['no such file: docs/missing.md', 'no heading #nope in docs/page.md', null, null]);
    expect(brokenReason({ file: 'README.md', line: 1, target: 'https://example.com/x.md#y' }, read)).toBeNull();
    expect(brokenReason({ file: 'README.md', line: 1, target: 'mailto:a@b.c' }, read)).toBeNull();
  });
});
