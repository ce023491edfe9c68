// `svc-server --dev`: the newcomer's main job. Besides the control plane on the embedded
// database, when Docker answers it runs a local sidecar joined as a host of the first team, so
// a deploy works at once. The sidecar's identity and data live under ./.svc (SVC_DEV_DIR).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { settledWithin } from '../shared/concurrency.ts';
import type { Db } from './db/types.ts';
import { mintJoinToken } from './hosts/join-tokens.ts';
import { getHostRow } from './hosts/store.ts';
import { firstTeam } from './identity/store.ts';

const SVCD = fileURLToPath(new URL('../programs/svcd.ts', import.meta.url));

export interface DevSidecar {
  stop(): Promise<void>;
}

function dockerAnswers(): Promise<string | null> {
  return new Promise((r) =>
    execFile('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: 15_000 }, (err, out) =>
      r(err ? null : out.trim() || null),
    ),
  );
}

/** The saved identity, unless it belongs to another database (then it is forgotten). */
async function knownState(db: Db, statePath: string): Promise<boolean> {
  if (!existsSync(statePath)) return false;
  try {
    const { host_id } = JSON.parse(readFileSync(statePath, 'utf8')) as { host_id: string };
    if (await getHostRow(db, host_id)) return true;
  } catch {}
  rmSync(statePath, { force: true });
  return false;
}

export async function startDevSidecar(
  db: Db,
  url: string,
  log: (line: string) => void,
): Promise<DevSidecar | null> {
  const version = await dockerAnswers();
  if (!version) {
    log('--dev: Docker is not reachable, so no local host joins; start dockerd and restart to deploy here');
    return null;
  }
  const dir = resolve(process.env.SVC_DEV_DIR ?? '.svc');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const state = join(dir, 'dev-host.json');
  const args = ['--state', state, '--data', join(dir, 'data'), '--server', url];
  if (!(await knownState(db, state))) {
    const team = await firstTeam(db);
    if (!team) throw new Error('--dev: no team to join the local host to');
    args.push('--token', (await mintJoinToken(db, team.ID)).token);
  }
  const child: ChildProcess = spawn(process.execPath, [SVCD, 'join', ...args], {
    stdio: ['ignore', 'inherit', 'inherit'],
    // The local sidecar ends with this process, even when this one is killed outright.
    // Copy-on-write forks even on ext4: the local sidecar keeps datasets on an XFS image.
    env: { SVC_XFS_LOOP: 'auto', ...process.env, SVC_EXIT_WITH_PARENT: String(process.pid) },
  });
  log(`--dev: local sidecar started (Docker ${version}); its identity and data are under ${dir}`);
  // A sidecar that cannot be started is reported; it never takes the control plane down.
  child.on('error', (err) => log(`--dev: the local sidecar could not run: ${err.message}`));
  child.once('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGTERM')
      log(`--dev: the local sidecar exited (${signal ?? code}); see its lines above`);
  });
  return {
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await settledWithin(gone, 12_000);
    },
  };
}

/** In dev mode a generated bootstrap key is also kept in ./.svc/dev-api-key (0600). */
export function saveDevKey(apiKey: string): string {
  const dir = resolve(process.env.SVC_DEV_DIR ?? '.svc');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, 'dev-api-key');
  writeFileSync(path, `${apiKey}\n`, { mode: 0o600 });
  return path;
}
