// Test images, made without a registry (none is reachable from test machines):
//
// - svc-test/busybox:latest: Debian's static /bin/busybox plus a symlink per applet, `docker
//   import`ed with a PATH. About 1-2 s.
// - svc-test/pgredis:latest: Debian bookworm (debootstrap minbase) with postgresql, redis-server
//   and mariadb-server, and test/images/pgredis/entrypoint.sh, which runs any one of them. The first build
//   needs the Debian mirror and takes about 2-3 minutes (debootstrap ~40 s, apt ~60-90 s, tar);
//   its root file system is cached as ~/.cache/svc-test-images/pgredis-<version>.tar, and later
//   builds only `docker import` it (about 10 s).
//
// Neither image needs the network at run time. Concurrent test processes serialise on a lock dir.
import { execFile } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export const BUSYBOX_IMAGE = 'svc-test/busybox:latest';
export const PGREDIS_IMAGE = 'svc-test/pgredis:latest';

/** Bumped when an image's content changes; an image without the current label is rebuilt. */
const VERSIONS = { busybox: '2', pgredis: '2' };
const LABEL = 'svc.test.image';
const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const MIRROR = process.env.SVC_TEST_DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
const HERE = dirname(fileURLToPath(import.meta.url));

export function cacheDir(): string {
  return process.env.SVC_TEST_IMAGE_CACHE ?? join(homedir(), '.cache', 'svc-test-images');
}

function run(cmd: string, args: string[], timeoutMs = 20 * 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs },
      (err, out, errOut) => {
        if (err)
          reject(new Error(`${cmd} ${args.join(' ')}: ${(errOut || err.message).trim().slice(-2000)}`));
        else resolve(out);
      },
    );
  });
}

async function labelOf(image: string): Promise<string | null> {
  try {
    const out = await run('docker', [
      'image',
      'inspect',
      '--format',
      `{{index .Config.Labels "${LABEL}"}}`,
      image,
    ]);
    return out.trim();
  } catch {
    return null;
  }
}

/** Holds a lock directory while `fn` runs; a lock older than 30 minutes is taken as abandoned. */
async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  mkdirSync(cacheDir(), { recursive: true });
  const lock = join(cacheDir(), `.lock-${name}`);
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 30 * 60_000) rmSync(lock, { recursive: true, force: true });
      } catch {
        // released meanwhile
      }
      await sleep(500);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

async function importTar(tar: string, image: string, changes: string[]): Promise<void> {
  await run('docker', ['import', ...changes.flatMap((c) => ['-c', c]), tar, image]);
}

async function buildBusybox(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'svc-busybox-'));
  try {
    for (const d of ['bin', 'etc', 'tmp', 'root', 'home', 'var/tmp', 'usr/bin'])
      mkdirSync(join(root, d), { recursive: true });
    copyFileSync('/bin/busybox', join(root, 'bin/busybox'));
    const applets = (await run('/bin/busybox', ['--list'])).split('\n').filter((a) => a && a !== 'busybox');
    for (const a of applets) symlinkSync('busybox', join(root, 'bin', a));
    symlinkSync('../../bin/busybox', join(root, 'usr/bin/env'));
    writeFileSync(
      join(root, 'etc/passwd'),
      'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nagent:x:1000:1000:agent:/home:/bin/sh\n',
    );
    writeFileSync(join(root, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\nagent:x:1000:\n');
    const tar = `${root}.tar`;
    await run('chmod', ['1777', join(root, 'tmp')]);
    await run('tar', ['-C', root, '--numeric-owner', '-cf', tar, '.']);
    await importTar(tar, BUSYBOX_IMAGE, [
      `ENV PATH=${PATH}`,
      'CMD ["/bin/sh"]',
      `LABEL ${LABEL}=busybox-${VERSIONS.busybox}`,
    ]);
    rmSync(tar, { force: true });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** debootstrap + apt in a chroot, then the root file system as a tar in the cache. */
async function bootstrapPgredis(tar: string): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'svc-pgredis-'));
  try {
    await run('debootstrap', ['--variant=minbase', 'bookworm', root, MIRROR]);
    // Package scripts must not try to start services inside the chroot.
    writeFileSync(join(root, 'usr/sbin/policy-rc.d'), '#!/bin/sh\nexit 101\n', { mode: 0o755 });
    const chroot = (...args: string[]) => run('chroot', [root, ...args]);
    await chroot('apt-get', 'update');
    await chroot(
      'env',
      'DEBIAN_FRONTEND=noninteractive',
      'apt-get',
      'install',
      '-y',
      '--no-install-recommends',
      'postgresql',
      'redis-server',
      'mariadb-server',
      'mariadb-client',
    );
    // The package's own cluster is not used: the entrypoint makes one in $PGDATA.
    await chroot(
      'sh',
      '-c',
      'for c in /etc/postgresql/*/main; do [ -d "$c" ] && pg_dropcluster "$(basename "$(dirname "$c")")" main; done; true',
    );
    await chroot('apt-get', 'clean');
    rmSync(join(root, 'var/lib/apt/lists'), { recursive: true, force: true });
    rmSync(join(root, 'usr/sbin/policy-rc.d'));
    // Nor is the package's MariaDB data dir: the entrypoint initialises /var/lib/mysql when empty.
    rmSync(join(root, 'var/lib/mysql'), { recursive: true, force: true });
    mkdirSync(join(root, 'var/lib/mysql'), { recursive: true });
    mkdirSync(join(root, 'var/lib/postgresql/data'), { recursive: true });
    mkdirSync(join(root, 'data'), { recursive: true });
    copyFileSync(join(HERE, '../images/pgredis/entrypoint.sh'), join(root, 'usr/local/bin/svc-entrypoint'));
    await run('chmod', ['755', join(root, 'usr/local/bin/svc-entrypoint')]);
    await run('tar', ['-C', root, '--numeric-owner', '-cf', `${tar}.tmp`, '.']);
    renameSync(`${tar}.tmp`, tar);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

async function buildPgredis(): Promise<void> {
  const tar = join(cacheDir(), `pgredis-${VERSIONS.pgredis}.tar`);
  if (!existsSync(tar)) await bootstrapPgredis(tar);
  const pgBin = await pgBinDir(tar);
  await importTar(tar, PGREDIS_IMAGE, [
    `ENV PATH=${pgBin}:${PATH}`,
    'ENV PGDATA=/var/lib/postgresql/data',
    'ENTRYPOINT ["/usr/local/bin/svc-entrypoint"]',
    'CMD ["postgres"]',
    `LABEL ${LABEL}=pgredis-${VERSIONS.pgredis}`,
  ]);
}

/** /usr/lib/postgresql/<major>/bin as found in the cached root file system. */
async function pgBinDir(tar: string): Promise<string> {
  const list = await run('tar', ['-tf', tar, '--wildcards', './usr/lib/postgresql/*/bin/postgres']);
  const path = list.split('\n').find((l) => l.endsWith('/bin/postgres'));
  if (!path) throw new Error(`${tar} has no postgres binary; delete it to rebuild`);
  return path.slice(1, -'/postgres'.length);
}

async function ensure(name: 'busybox' | 'pgredis', image: string, build: () => Promise<void>): Promise<void> {
  const want = `${name}-${VERSIONS[name]}`;
  if ((await labelOf(image)) === want) return;
  await withLock(name, async () => {
    if ((await labelOf(image)) !== want) await build();
  });
}

/** Builds the test images that are missing (see the header for what each costs). */
export async function ensureTestImages(opts: { postgres?: boolean } = {}): Promise<void> {
  await ensure('busybox', BUSYBOX_IMAGE, buildBusybox);
  if (opts.postgres) await ensure('pgredis', PGREDIS_IMAGE, buildPgredis);
}

/**
 * The images the two templates name (debian:bookworm-slim, postgres:16, redis:7), for machines
 * without a registry: stand-ins derived from svc-test/pgredis (Debian bookworm with Postgres and
 * Redis) so `svc init` + `svc deploy` work offline. An image of that name that already exists
 * (a real pull) is never replaced.
 */
export const TEMPLATE_IMAGES: Record<string, string[]> = {
  'debian:bookworm-slim': ['ENTRYPOINT []', 'CMD ["bash"]'],
  'postgres:16': ['ENTRYPOINT ["/usr/local/bin/svc-entrypoint"]', 'CMD ["postgres"]'],
  'redis:7': ['ENTRYPOINT ["/usr/local/bin/svc-entrypoint"]', 'CMD ["redis"]', 'WORKDIR /data'],
};

export async function ensureTemplateImages(): Promise<void> {
  await ensureTestImages({ postgres: true });
  await withLock('templates', async () => {
    for (const [image, changes] of Object.entries(TEMPLATE_IMAGES)) {
      if ((await labelOf(image)) !== null) continue;
      const id = (await run('docker', ['create', PGREDIS_IMAGE])).trim();
      try {
        const args = [...changes, `LABEL ${LABEL}=stand-in`].flatMap((c) => ['--change', c]);
        await run('docker', ['commit', ...args, id, image]);
      } finally {
        await run('docker', ['rm', '-f', id]);
      }
    }
  });
}
