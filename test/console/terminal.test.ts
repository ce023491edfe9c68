// The environment page's terminal and file browser in real Chromium, on a real control plane,
// a real svcd and real Docker: a shell over the process WebSocket (typed input, output, a resize
// seen by `stty size`, the end shown, a hang-up when closed; a dropped WebSocket re-attached with
// `since`, nothing lost and nothing twice; a process the page could not attach to hung up), the WebSocket's browser credential
// (subprotocols: own session accepted, another team's session 404, a bad one 401), and files
// uploaded, listed, opened (text and binary) and downloaded through the page.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { WebSocket } from 'ws';
import { sleep } from '../../shared/concurrency.ts';
import { b64, followSse, hasText } from '../e2e/processes-support.ts';
import { IDLE_COMMAND, type Real, startReal } from '../e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { ARTIFACTS, type ConsoleBrowser, devLogin, openBrowser, sessionOf } from './browser.ts';

const T = { timeout: 180_000 };
const STACK = `
services:
  app:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
`;

/** The page's document, in the functions that run in the page (this type check has no DOM). */
declare const document: {
  querySelectorAll(selector: string): Iterable<{ textContent: string | null }>;
  body: { innerText: string };
};
declare function getComputedStyle(element: unknown): { color: string };

/** Waits until a row of the terminal reads exactly `line` (spaces trimmed). */
async function terminalLine(page: Page, line: string): Promise<void> {
  await page.waitForFunction(
    (want) =>
      [...document.querySelectorAll('.xterm-rows > div')].some(
        (row) => (row.textContent ?? '').replace(/\u00a0/g, ' ').trim() === want,
      ),
    line,
  );
}

/** Waits until a row of the terminal contains `text`. */
async function terminalHas(page: Page, text: string): Promise<void> {
  await page.waitForFunction(
    (want) =>
      [...document.querySelectorAll('.xterm-rows > div')].some((row) =>
        (row.textContent ?? '').replace(/\u00a0/g, ' ').includes(want),
      ),
    text,
  );
}

/** Types a command line into the terminal. */
async function typeLine(page: Page, text: string): Promise<void> {
  await page.locator('.xterm-helper-textarea').focus();
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

/** The terminal's size as the page states it: [rows, cols]. */
async function shownSize(page: Page): Promise<[number, number]> {
  const text = await page.getByText(/^Attached to app: \d+ columns × \d+ rows$/).innerText();
  const m = /(\d+) columns × (\d+) rows/.exec(text) as RegExpExecArray;
  return [Number(m[2]), Number(m[1])];
}

/** Opens the stream WebSocket the way a browser must (credential as subprotocols); the HTTP status or 101. */
function dialAs(url: string, env: string, pid: string, protocols: string[]): Promise<number> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/envs/${env}/processes/${pid}/stream`, protocols);
  return new Promise((resolve, reject) => {
    ws.on('open', () => {
      assert.equal(ws.protocol, 'svc.v1', 'only svc.v1 is selected: the credential is never echoed');
      ws.close();
      resolve(101);
    });
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.on('error', reject);
  });
}

describe('console: terminal and file browser on a real environment', {
  skip: tier('browser') || tier('docker'),
}, () => {
  let r: Real;
  let b: ConsoleBrowser;
  let session: string;
  let env: string;
  const as = (method: string, path: string, body?: unknown) =>
    r.t.req(method, path, { token: session, ...(body === undefined ? {} : { body }) });
  const finished = async (id: string) => {
    for (;;) {
      const d = await as('GET', `/v1/deployments/${id}`);
      if (d.body.deployment?.FinishedAt) return d.body.deployment;
      await sleep(200);
    }
  };

  before(async () => {
    await ensureTestImages();
    r = await startReal({ env: { SVC_DEV_LOGIN: '1' }, join: false });
    b = await openBrowser(r.t.url);
    await devLogin(b.page, r.t.url, 'terminal@example.com');
    await b.page.getByRole('heading', { name: 'Projects', level: 1 }).waitFor();
    session = await sessionOf(b.page);
    // The signed-in user's team gets the host and the environment.
    const jt = await as('POST', '/v1/join-tokens', {});
    assert.equal(jt.status, 201, JSON.stringify(jt.body));
    await r.startSidecar(jt.body.token);
    const p = await as('POST', '/v1/projects', { name: 'term' });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    env = p.body.environments[0].ID;
    const d = await as('POST', '/v1/projects/term/deploy', { compose: STACK });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const dep = await finished(d.body.deployment.ID);
    assert.equal(dep.Status, 'succeeded', `${dep.Error}\n${r.log()}`);
  });
  after(async () => {
    try {
      await b?.close();
    } finally {
      if (env) {
        const d = await as('DELETE', `/v1/envs/${env}`).catch(() => null);
        if (d?.status === 202) await finished(d.body.deployment.ID).catch(() => {});
      }
      await r?.close();
    }
  });

  test('a shell in the terminal: typed input, its output, a resize seen by stty, the end', T, async () => {
    const { page } = b;
    await page.setViewportSize({ width: 960, height: 760 });
    await page.goto(`${r.t.url}/app/env/?id=${env}`);
    await page.getByRole('heading', { name: 'Terminal', level: 2 }).waitFor();
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.getByText(/^Attached to app: /).waitFor();

    await typeLine(page, 'echo hi');
    await terminalLine(page, 'hi');
    // A 24-bit colour (a style attribute in the terminal's DOM) is allowed by the page's policy:
    // the browser watcher fails the suite on any refusal.
    await typeLine(page, "printf '\\033[38;2;200;30;30mRED\\033[0m\\n'");
    await terminalLine(page, 'RED');
    const red = page.locator('.xterm-rows span').getByText('RED', { exact: true });
    assert.equal(await red.evaluate((el) => getComputedStyle(el).color), 'rgb(200, 30, 30)');

    const [rows, cols] = await shownSize(page);
    await typeLine(page, 'stty size');
    await terminalLine(page, `${rows} ${cols}`);
    await typeLine(page, 'ls /');
    await terminalHas(page, 'sbin');
    await terminalLine(page, '/ #');
    // The README's picture of the console (docs/console.png is a copy of this one): the page down
    // to the terminal's bottom edge.
    const edge = (await page.locator('.term-box').boundingBox()) as { y: number; height: number };
    await page.screenshot({
      path: join(ARTIFACTS, 'env-terminal-viewport.png'),
      fullPage: true,
      clip: { x: 0, y: 0, width: 960, height: Math.ceil(edge.y + edge.height + 16) },
    });

    // A smaller page fits the terminal to fewer columns and rows; the PTY is resized to match.
    await page.setViewportSize({ width: 760, height: 560 });
    await page.waitForFunction((was) => {
      const m = /(\d+) columns × (\d+) rows/.exec(document.body.innerText);
      return m !== null && `${m[2]} ${m[1]}` !== was;
    }, `${rows} ${cols}`);
    const [rows2, cols2] = await shownSize(page);
    assert.ok(cols2 < cols, `columns ${cols} → ${cols2}`);
    assert.ok(rows2 < rows, `rows ${rows} → ${rows2}`);
    await typeLine(page, 'clear; stty size');
    await terminalLine(page, `${rows2} ${cols2}`);
    await b.shot('env-terminal');

    // Its end is shown, with the exit code.
    await typeLine(page, 'exit 3');
    await page.getByText('The process exited with code 3.').waitFor();
    await terminalLine(page, '[process exited with code 3]');
  });

  test('the WebSocket takes a session as subprotocols; another team gets 404, a bad one 401', T, async () => {
    const { page } = b;
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.getByText(/^Attached to app: /).waitFor();
    const list = await as('GET', `/v1/envs/${env}/processes`);
    const running = list.body.processes.filter((p: { status: string }) => p.status === 'running');
    assert.equal(running.length, 1, JSON.stringify(list.body));
    const pid = running[0].pid as string;

    assert.equal(await dialAs(r.t.url, env, pid, ['svc.v1', `svc.bearer.${session}`]), 101);
    const stranger = await r.t.req('POST', '/auth/dev-login', {
      token: false,
      body: { email: 'stranger@example.com' },
    });
    assert.equal(await dialAs(r.t.url, env, pid, ['svc.v1', `svc.bearer.${stranger.body.token}`]), 404);
    assert.equal(await dialAs(r.t.url, env, pid, ['svc.v1', 'svc.bearer.dst_nope']), 401);
    // The stranger naming our team is not a member of it.
    const ours = (await as('GET', '/v1/me')).body.team.ID as string;
    assert.equal(
      await dialAs(r.t.url, env, pid, ['svc.v1', `svc.bearer.${stranger.body.token}`, `svc.team.${ours}`]),
      403,
    );
    assert.equal(
      await dialAs(r.t.url, env, pid, ['svc.v1', `svc.bearer.${session}`, `svc.team.${ours}`]),
      101,
    );
    // Two credentials are refused before any lookup.
    assert.equal(
      await dialAs(r.t.url, env, pid, [
        'svc.v1',
        `svc.bearer.${session}`,
        `svc.bearer.${stranger.body.token}`,
      ]),
      401,
    );

    // Closing the terminal hangs the shell up: the process ends.
    await page.getByRole('button', { name: 'Close terminal' }).click();
    for (;;) {
      const one = await as('GET', `/v1/envs/${env}/processes/${pid}`);
      if (one.body.status === 'exited') break;
      await sleep(100);
    }
    const alive = await r.t.req('GET', '/health', { token: false });
    assert.equal(alive.status, 200);
  });

  /** The running processes of the environment, by pid. */
  const running = async () => {
    const list = await as('GET', `/v1/envs/${env}/processes`);
    return list.body.processes
      .filter((p: { status: string }) => p.status === 'running')
      .map((p: { pid: string }) => p.pid) as string[];
  };
  const exited = async (pid: string) => {
    for (;;) {
      const one = await as('GET', `/v1/envs/${env}/processes/${pid}`);
      if (one.body.status === 'exited') return;
      await sleep(100);
    }
  };

  test(
    'the WebSocket drops: the terminal re-attaches after what it showed; output from meanwhile appears once',
    T,
    async () => {
      const { page } = b;
      // The server's end of each process WebSocket, to drop it the way a restart or the network would.
      const sockets: Socket[] = [];
      const track = (req: { url?: string }, socket: Socket) => {
        if (req.url?.includes('/processes/')) sockets.push(socket);
      };
      r.t.server.app.server.on('upgrade', track);
      try {
        await page.goto(`${r.t.url}/app/env/?id=${env}`);
        await page.getByRole('button', { name: 'Open terminal' }).click();
        await page.getByText(/^Attached to app: /).waitFor();
        const [pid] = await running();
        await typeLine(page, 'echo before-$((6*7))');
        await terminalLine(page, 'before-42');
        for (const s of sockets) s.destroy();
        await page.getByRole('button', { name: 'Re-attach' }).waitFor();
        await page.getByText(/Disconnected.*the process is still running\./).waitFor();
        // Output the process makes while nobody is attached (seen by a follower of our own).
        const witness = await followSse(r.t, env, pid, { token: session });
        await as('POST', `/v1/envs/${env}/processes/${pid}/input`, {
          data: b64('echo meanwhile-$((6*7))\n'),
        });
        await witness.until(hasText('meanwhile-42'));
        witness.abort();
        await page.getByRole('button', { name: 'Re-attach' }).click();
        await page.getByText(/^Attached to app: /).waitFor();
        await terminalLine(page, 'meanwhile-42');
        // `since` asked only for what followed: the earlier output is not shown a second time.
        const rows = await page.evaluate(() =>
          [...document.querySelectorAll('.xterm-rows > div')].map((row) =>
            (row.textContent ?? '').replace(/\u00a0/g, ' ').trim(),
          ),
        );
        assert.equal(rows.filter((x) => x === 'before-42').length, 1, rows.join('\n'));
        // Still a working terminal.
        await typeLine(page, 'echo after-$((6*7))');
        await terminalLine(page, 'after-42');
        await page.getByRole('button', { name: 'Close terminal' }).click();
        await exited(pid);
      } finally {
        r.t.server.app.server.off('upgrade', track);
      }
    },
  );

  test('a process the page could never attach to is hung up, not left running', T, async () => {
    const page = await b.context.newPage();
    try {
      // This page's WebSocket always asks for a path the server refuses (as a proxy without
      // WebSocket support would): the process starts, the attach fails.
      await page.addInitScript({
        content: `{ const W = window.WebSocket; window.WebSocket = class extends W {
          constructor(url, protocols) { super(String(url).replace(/\\/stream$/, '/refused'), protocols); } }; }`,
      });
      const before = new Set(await running());
      await page.goto(`${r.t.url}/app/env/?id=${env}`);
      await page.getByRole('button', { name: 'Open terminal' }).click();
      await page.getByText(/could not attach: .*the process was hung up/).waitFor();
      const started = (await as('GET', `/v1/envs/${env}/processes`)).body.processes.filter(
        (p: { pid: string; cmd: string[] }) => !before.has(p.pid) && p.cmd[0] === 'sh',
      );
      assert.ok(started.length >= 1, 'a process was started');
      for (const p of started) await exited(p.pid);
      assert.deepEqual(
        (await running()).filter((p) => !before.has(p)),
        [],
      );
    } finally {
      await page.close();
    }
  });

  test(
    'files: upload into a directory, see it listed, open it, download it; a binary file says so',
    T,
    async () => {
      const { page } = b;
      await page.goto(`${r.t.url}/app/env/?id=${env}`);
      await page.getByRole('heading', { name: 'Files', level: 2 }).waitFor();
      const files = page.getByRole('region', { name: 'Files' });
      await files.getByRole('table').waitFor();
      await files.getByLabel('Directory').fill('/tmp');
      await files.getByRole('button', { name: 'List' }).click();
      await files.getByRole('table', { name: 'app: /tmp' }).waitFor();

      const text = 'first line\nsecond line: héllo\n';
      await files.getByLabel('Upload a file to /tmp').setInputFiles({
        name: 'notes.txt',
        mimeType: 'text/plain',
        buffer: Buffer.from(text),
      });
      await files.getByRole('button', { name: 'Upload', exact: true }).click();
      await files.getByText(`Uploaded /tmp/notes.txt (${Buffer.byteLength(text)} bytes).`).waitFor();
      await files.getByRole('rowheader', { name: 'notes.txt' }).waitFor();
      // The bytes in the container are the ones uploaded.
      const got = await r.t.req('GET', `/v1/envs/${env}/fs?service=app&path=/tmp/notes.txt`, {
        token: session,
      });
      assert.equal(got.status, 200);

      await files.getByRole('button', { name: 'Open notes.txt' }).click();
      const shown = files.locator('figure.file pre');
      await shown.waitFor();
      assert.equal(await shown.textContent(), text);

      const [download] = await Promise.all([
        page.waitForEvent('download'),
        files.getByRole('button', { name: 'Download notes.txt' }).click(),
      ]);
      assert.equal(download.suggestedFilename(), 'notes.txt');
      assert.equal(readFileSync(await download.path(), 'utf8'), text);

      const binary = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3, 0xff, 0xfe]);
      await files.getByLabel('Upload a file to /tmp').setInputFiles({
        name: 'blob.bin',
        mimeType: 'application/octet-stream',
        buffer: binary,
      });
      await files.getByRole('button', { name: 'Upload', exact: true }).click();
      await files.getByRole('rowheader', { name: 'blob.bin' }).waitFor();
      await files.getByRole('button', { name: 'Open blob.bin' }).click();
      await files.getByText('/tmp/blob.bin (10 bytes): a binary file: download it.').waitFor();
      assert.equal(await shown.count(), 0, 'a binary file is not shown as text');

      // Parent directory goes up; a directory's name lists it.
      await files.getByRole('button', { name: 'Parent directory' }).click();
      await files.getByRole('table', { name: 'app: /' }).waitFor();
      await files.getByRole('button', { name: 'tmp/' }).click();
      await files.getByRole('rowheader', { name: 'notes.txt' }).waitFor();
      await b.shot('env-files');
    },
  );
});
