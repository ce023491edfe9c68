// Runs the real `svc` program as a subprocess against a real control plane with a fake sidecar
// joined as its host. Each run gets a controlled environment: HOME (and XDG_CONFIG_HOME when
// asked) in a temp dir, and no SVC_* variable leaks in from the machine running the tests.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { type DialectName, startTestServer, type TestServer } from '../support/server.ts';

export const SVC = resolve(import.meta.dirname, '../../programs/svc.ts');

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Variables on top of PATH and HOME; `undefined` values are left out. */
  env?: Record<string, string | undefined>;
  home: string;
  cwd?: string;
  /** Called with the child and all stdout so far, on each chunk (login reads the user code). */
  onStdout?: (soFar: string, child: ChildProcess) => void;
  timeoutMs?: number;
  /** The program to run instead of the sources on this Node: a single executable, or a Node and a script. */
  program?: string[];
}

const made: string[] = [];
// Whatever a test did not remove itself (a download target, a failed test's home) goes when
// the test file's process ends: a run must not leave directories behind in /tmp.
process.once('exit', () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

export function tempDir(prefix = 'svc-cli-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** Runs `svc <args>`; never rejects on a non-zero exit (the code is part of the result). */
export function svc(args: string[], opts: RunOptions): Promise<Run> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: opts.home };
  // PATH may be overridden (e.g. to an empty directory: a single executable needs no Node).
  for (const [k, v] of Object.entries(opts.env ?? {})) if (v !== undefined) env[k] = v;
  return new Promise((resolvePromise, reject) => {
    const [cmd, ...pre] = opts.program ?? [process.execPath, SVC];
    const child = spawn(cmd as string, [...pre, ...args], { env, cwd: opts.cwd ?? opts.home });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `svc ${args.join(' ')} did not exit within ${opts.timeoutMs ?? 60_000} ms\n${stdout}\n${stderr}`,
        ),
      );
    }, opts.timeoutMs ?? 60_000);
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      opts.onStdout?.(stdout, child);
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code: code ?? -1, stdout, stderr });
    });
  });
}

/**
 * An `onStdout` for `svc login --no-browser`: once the user code is printed, a console session
 * approves it for `teamId` through the API (what a person does on the device page).
 */
export function approveWhenPrinted(t: TestServer, session: string, teamId: string): RunOptions['onStdout'] {
  let approved = false;
  return (soFar) => {
    const code = /\b([A-Z]{4}-[A-Z]{4})\b/.exec(soFar)?.[1];
    if (!code || approved) return;
    approved = true;
    void t.req('POST', '/v1/device/approve', { token: session, body: { user_code: code, team_id: teamId } });
  };
}

/** Asserts the exit code, showing the whole run when it differs. */
export function assertExit(r: Run, code: number): void {
  assert.equal(
    r.code,
    code,
    `exit ${r.code}, expected ${code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`,
  );
}

/** Asserts exit 1 with exactly one stderr line `svc: ...` containing `phrase`. */
export function assertFails(r: Run, phrase: string | RegExp): void {
  assertExit(r, 1);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `one line expected on stderr, got:\n${r.stderr}`);
  assert.ok(lines[0].startsWith('svc: '), r.stderr);
  if (typeof phrase === 'string') assert.ok(lines[0].includes(phrase), `'${phrase}' not in '${lines[0]}'`);
  else assert.match(lines[0], phrase);
}

/** Asserts a usage error: exit 2, `svc: <message>` and the usage line. */
export function assertUsage(r: Run, phrase: string): void {
  assertExit(r, 2);
  assert.ok(r.stderr.startsWith(`svc: `), r.stderr);
  assert.ok(r.stderr.includes(phrase), `'${phrase}' not in:\n${r.stderr}`);
  assert.match(r.stderr, /^usage: svc /m);
}

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => res(port));
    });
  });
}

export interface CliWorld {
  t: TestServer;
  sc: FakeSidecar;
  home: string;
  /** SVC_SERVER and SVC_API_KEY of the bootstrap team. */
  env: Record<string, string>;
  run(args: string[], extra?: Partial<RunOptions>): Promise<Run>;
  close(): Promise<void>;
}

/** A control plane, a fake sidecar joined through a real join token, and a temp HOME. */
export async function cliWorld(
  dialect: DialectName = 'sqlite',
  serverEnv: Record<string, string> = {},
): Promise<CliWorld> {
  const t = await startTestServer(dialect, serverEnv);
  const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
  assert.equal(jt.status, 201, JSON.stringify(jt.body));
  const sc = await new FakeSidecar(t.url).connect(jt.body.token);
  const home = tempDir();
  const env = { SVC_SERVER: t.url, SVC_API_KEY: t.key };
  return {
    t,
    sc,
    home,
    env,
    run: (args, extra = {}) => svc(args, { home, ...extra, env: { ...env, ...extra.env } }),
    close: async () => {
      await sc.close();
      await t.close();
      removeDir(home);
    },
  };
}

/** The deployment id in `deployment <id>: <status>`, the last line of a waited run. */
export function finalLine(r: Run): { id: string; status: string } {
  const last = r.stdout.trimEnd().split('\n').at(-1) ?? '';
  const m = /^deployment (\S+): (\S+)$/.exec(last);
  assert.ok(m, `no final deployment line in:\n${r.stdout}`);
  return { id: m[1], status: m[2] };
}
