// Test tiers that need something from the machine. A tier that cannot run is skipped LOUDLY with
// the reason; with SVC_REQUIRE_TIERS (CI sets it) a missing tier fails instead of skipping.
import { existsSync } from 'node:fs';

export type Tier = 'postgres' | 'docker' | 'browser' | 'haproxy';

/** The load balancer the replica tests put in front (Debian's haproxy package). */
export const HAPROXY = process.env.SVC_TEST_HAPROXY ?? '/usr/sbin/haproxy';

/** The browser the CORS suite drives through playwright-core (Debian's chromium package). */
export const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';

const required = new Set((process.env.SVC_REQUIRE_TIERS ?? '').split(',').filter(Boolean));

function reasonFor(tier: Tier): string | null {
  if (tier === 'postgres') {
    return process.env.SVC_TEST_PG
      ? null
      : 'SVC_TEST_PG is unset (no Postgres server binaries found by npm test)';
  }
  if (tier === 'haproxy') {
    return existsSync(HAPROXY)
      ? null
      : `no HAProxy at ${HAPROXY} (apt-get install haproxy, or set SVC_TEST_HAPROXY)`;
  }
  if (tier === 'browser') {
    return existsSync(CHROMIUM)
      ? null
      : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set SVC_TEST_CHROMIUM)`;
  }
  const sock = process.env.DOCKER_HOST ? null : '/var/run/docker.sock';
  if (sock && !existsSync(sock))
    return `no Docker engine socket at ${sock} (install docker.io and start dockerd)`;
  return process.env.SVC_TEST_DOCKER === '1'
    ? null
    : 'docker tier not enabled (npm test sets SVC_TEST_DOCKER=1 when the engine answers)';
}

/**
 * Returns `false` when the tier can run, or a loud skip reason for node:test's `skip` option.
 * Throws when the tier is required (CI) but cannot run, so CI can never pass by skipping it.
 */
export function tier(name: Tier): false | string {
  const reason = reasonFor(name);
  if (!reason) return false;
  if (required.has(name)) throw new Error(`required test tier '${name}' cannot run: ${reason}`);
  const msg = `*** ${name.toUpperCase()} TIER SKIPPED: ${reason} ***`;
  if (!warned.has(name)) {
    warned.add(name);
    process.stderr.write(`${msg}\n`);
  }
  return msg;
}
const warned = new Set<Tier>();
