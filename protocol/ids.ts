// Identifier prefixes (spec: "Conventions" 4) and generation. Ids sort by creation time: the first
// ten characters encode milliseconds, so "newest first" listings can order by id.
import { randomBytes, randomFillSync } from 'node:crypto';

export const PREFIX = {
  env: 'env_',
  version: 'ver_',
  host: 'host_',
  command: 'cmd_',
  apiKey: 'dak_',
  session: 'dst_',
  deviceCode: 'ddc_',
  joinToken: 'djt_',
  hostSecret: 'dhs_',
  // Not fixed by the spec; chosen here.
  team: 'team_',
  user: 'usr_',
  key: 'key_',
  project: 'prj_',
  deployment: 'dep_',
  cloud: 'cld_',
  event: 'evt_',
  /** The forks of one fan-out (`count` on fork or sandboxes) carry this id in their params. */
  fanout: 'fan_',
  /** A live process (unique across hosts, so a pid never names a process of an older svcd). */
  process: 'proc_',
  /** One attached follower of a live process, on one host stream. */
  follow: 'fol_',
  /** One control-plane process among the replicas sharing a database. */
  replica: 'rep_',
} as const;

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

function timePart(ms: number): string {
  let out = '';
  let n = ms;
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[n % 32] + out;
    n = Math.floor(n / 32);
  }
  return out;
}

let lastMs = 0;
let counter = 0;

/**
 * Random bytes for ids, drawn 4 KiB at a time: a `randomBytes(5)` per id cost ~18 µs of the exec
 * hot path. Ids are not secrets (secrets come from `newSecret`, unpooled).
 */
const POOL = Buffer.alloc(4096);
let poolAt = POOL.length;

function idRandom(): Buffer {
  if (poolAt + 5 > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  poolAt += 5;
  return POOL.subarray(poolAt - 5, poolAt);
}

/** A time-ordered object id: prefix + 10 chars of time + 4 chars of counter + 8 random chars. */
export function newId(prefix: string): string {
  const now = Date.now();
  if (now === lastMs) counter++;
  else {
    lastMs = now;
    counter = 0;
  }
  const rnd = idRandom();
  let tail = '';
  for (let i = 0; i < 8; i++) tail += CROCKFORD[(rnd[i % 5] >> (i < 5 ? 0 : 3)) & 31];
  const seq = counter.toString(32).padStart(4, '0').slice(-4);
  return `${prefix}${timePart(now)}${seq}${tail}`;
}

/** The smallest id `newId(prefix)` can give at time `ms`: a bound for "created since ms" ranges. */
export function idFloor(prefix: string, ms: number): string {
  return `${prefix}${timePart(Math.max(0, ms))}`;
}

/**
 * A random suffix that keeps a name apart from its siblings (a pool member's `pool-<suffix>`, a
 * grader's `-verify-<suffix>`, a temp file beside its target): `chars` lowercase hex digits. Not
 * a secret, and not an id: ids come from `newId`.
 */
export function nameSuffix(chars = 8): string {
  return randomBytes(Math.ceil(chars / 2))
    .toString('hex')
    .slice(0, chars);
}

/** A bearer secret: prefix + 43 chars of base64url (256 random bits). */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}
