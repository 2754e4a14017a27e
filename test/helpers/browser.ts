/**
 * The one way tests open a real browser: Debian's chromium through playwright-core (never a
 * downloaded one), headless, and pages that record every console error and uncaught exception.
 */
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

export interface WatchedPage {
  page: Page;
  /** Console errors and uncaught exceptions of the page, in order. */
  errors: string[];
}

/** A new page of `browser` that records what goes wrong on it. */
export async function openPage(browser: Browser): Promise<WatchedPage> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  return { page, errors };
}

/** Wait until the viewer's client has drawn the page. */
export const viewerReady = (page: Page) => page.waitForSelector('body[data-ready="true"]');

/** Follow a navigation `action` causes, and wait for the viewer to draw the new page. */
export async function navigate(page: Page, action: () => Promise<unknown>): Promise<void> {
  await Promise.all([page.waitForNavigation(), action()]);
  await viewerReady(page);
}
