// The console's browser harness: Debian's Chromium driven by playwright-core, a fresh profile
// (--user-data-dir) per session, and two watchers that every test checks at the end: no page
// error (uncaught exception or refused by the content security policy) and no request to any
// origin but the control plane's. Screenshots go to test-artifacts/console/ (gitignored).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { CHROMIUM } from '../support/tiers.ts';

export const ARTIFACTS = resolve(import.meta.dirname, '../../test-artifacts/console');

/** Quiet, offline, reproducible: no network of Chromium's own, no GPU, no sandbox (root in CI). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface ConsoleBrowser {
  context: BrowserContext;
  page: Page;
  /** Uncaught exceptions and CSP refusals, from every page of the session. */
  errors: string[];
  /** Every request to an origin other than the control plane's. */
  foreign: string[];
  /** Saves a full-page screenshot as test-artifacts/console/<name>.png. */
  shot(name: string, page?: Page): Promise<void>;
  /** Asserts no page error and no foreign request, then closes Chromium and removes the profile. */
  close(): Promise<void>;
}

export async function openBrowser(serverUrl: string): Promise<ConsoleBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'svc-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 860 },
  });
  const origin = new URL(serverUrl).origin;
  const errors: string[] = [];
  const foreign: string[] = [];
  const watch = (p: Page) => {
    p.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    p.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text()))
        errors.push(`console: ${m.text()}`);
    });
  };
  context.on('request', (r) => {
    const url = r.url();
    if (url.startsWith('data:') || url === 'about:blank') return;
    if (new URL(url).origin !== origin) foreign.push(url);
  });
  context.on('page', watch);
  const page = context.pages()[0] ?? (await context.newPage());
  watch(page);
  mkdirSync(ARTIFACTS, { recursive: true });
  return {
    context,
    page,
    errors,
    foreign,
    shot: async (name, p = page) => {
      await p.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
    },
    close: async () => {
      try {
        assert.deepEqual(errors, [], 'page errors');
        assert.deepEqual(foreign, [], 'requests to another origin');
      } finally {
        await context.close();
        rmSync(profile, { recursive: true, force: true });
      }
    },
  };
}

/** Signs in on the sign-in page with the dev login and waits for the projects page. */
export async function devLogin(page: Page, baseUrl: string, email: string, path = '/app/'): Promise<void> {
  await page.goto(`${baseUrl}${path}`);
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Dev login' }).click();
}

/** The stored session token (the console keeps it in localStorage, never in a URL). */
export function sessionOf(page: Page): Promise<string> {
  return page.evaluate(() => localStorage.getItem('svc.session') ?? '');
}
