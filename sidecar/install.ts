// `svcd install` (spec "Sidecar program"): Linux and root only. Puts the sidecar at
// /usr/local/bin/svcd, writes /etc/svc/svcd.env (0600) and the systemd unit, then enables and
// starts it. SVC_INSTALL_ROOT (tests) prefixes every path; SVC_SYSTEMCTL overrides systemctl.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  realpathSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { SidecarOptions } from './options.ts';
import { isSingleExecutable } from './sea.ts';

export const UNIT = `[Unit]
Description=svc sidecar (svcd)
Wants=network-online.target
After=network-online.target docker.service
Wants=docker.service
# Never stop restarting: a sidecar that keeps failing (control plane away, Docker not up yet) is
# retried every RestartSec for as long as it takes; inside, svcd backs off its reconnects 1-30 s.
StartLimitIntervalSec=0

[Service]
# No PrivateTmp, ProtectSystem, ReadWritePaths, MountFlags or other mount-namespace option: svcd
# bind-mounts each checked relative bind source onto its staging path, and dockerd must see that
# mount. In a namespace of its own, dockerd would see only the empty staging path.
EnvironmentFile=/etc/svc/svcd.env
ExecStart=/usr/local/bin/svcd join --state /etc/svc/host.json
Restart=always
RestartSec=3
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
`;

function envFile(o: SidecarOptions): string {
  const line = (k: string, v: string) => `${k}=${v.replace(/\n/g, '')}\n`;
  return (
    line('SVC_SERVER', o.server) +
    line('SVC_JOIN_TOKEN', o.token) +
    line('SVC_DATA_DIR', o.dataDir) +
    line('SVC_ZFS_POOL', o.zfsPool)
  );
}

/** A packaged sidecar copies its own binary; a source checkout installs a launcher for it. */
async function placeBinary(target: string): Promise<void> {
  const sea = await isSingleExecutable();
  // Already in place (the install script put it there): copying a file onto itself is no update.
  if (sea && existsSync(target) && realpathSync(target) === realpathSync(process.execPath)) return;
  // Written beside and renamed over, so a running svcd (a re-install) is replaced, not truncated.
  const tmp = `${target}.new`;
  if (sea) {
    copyFileSync(process.execPath, tmp);
  } else {
    const script = resolve(process.argv[1] ?? 'programs/svcd.ts');
    writeFileSync(tmp, `#!/bin/sh\nexec '${process.execPath}' '${script}' "$@"\n`);
  }
  chmodSync(tmp, 0o755);
  renameSync(tmp, target);
}

export async function install(o: SidecarOptions): Promise<void> {
  if (process.platform !== 'linux') throw new Error('install works on Linux only');
  if (process.getuid?.() !== 0) throw new Error('install must run as root (try sudo)');
  const root = process.env.SVC_INSTALL_ROOT ?? '/';
  const at = (p: string) => join(root, p);
  mkdirSync(at('/usr/local/bin'), { recursive: true });
  await placeBinary(at('/usr/local/bin/svcd'));
  mkdirSync(at('/etc/svc'), { recursive: true, mode: 0o700 });
  writeFileSync(at('/etc/svc/svcd.env'), envFile(o), { mode: 0o600 });
  chmodSync(at('/etc/svc/svcd.env'), 0o600);
  mkdirSync(dirname(at('/etc/systemd/system/svcd.service')), { recursive: true });
  writeFileSync(at('/etc/systemd/system/svcd.service'), UNIT);
  const systemctl = process.env.SVC_SYSTEMCTL ?? 'systemctl';
  try {
    execFileSync(systemctl, ['daemon-reload'], { stdio: 'inherit' });
    execFileSync(systemctl, ['enable', '--now', 'svcd.service'], { stdio: 'inherit' });
  } catch (err) {
    throw new Error(
      `installed the files, but ${systemctl} failed (${(err as Error).message}); start it with: svcd join --state /etc/svc/host.json`,
    );
  }
  process.stdout.write('svcd installed and started (systemctl status svcd)\n');
}
