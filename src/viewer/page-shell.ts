/**
 * The one HTML document of every viewer page: it loads the client script, which reads the base path
 * from `data-base` and draws the page for the URL. No data is put into the HTML, so nothing a model
 * wrote is ever parsed as markup.
 */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeAttr = (text: string) => text.replace(/[&<>"']/g, (ch) => ESCAPES[ch]);

/** A link the shell shows above every page (the dashboard's way back to its run overview). */
export interface ShellLink {
  href: string;
  text: string;
}

export function renderPageShell(basePath: string, title: string, links: readonly ShellLink[] = []): string {
  const base = escapeAttr(basePath);
  const nav = links.length
    ? `<nav class="host-links">${links.map((l) => `<a href="${escapeAttr(l.href)}">${escapeAttr(l.text)}</a>`).join(' · ')}</nav>`
    : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeAttr(title)}</title>
<link rel="stylesheet" href="${base}/assets/viewer.css">
<script type="module" src="${base}/assets/viewer.js"></script>
</head>
<body data-base="${base}" data-title="${escapeAttr(title)}">${nav}<main id="app"><p class="loading">Loading…</p></main></body></html>
`;
}
