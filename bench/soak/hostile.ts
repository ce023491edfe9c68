// The hostile half of the soak: every kind of input of the fuzz and hardening suites, drawn from
// their own generators (test/hardening/support), in small bursts between the honest work. Each
// says which answers it expects; anything else is recorded as unexpected. Requests without a
// valid credential come from 127.0.0.2 (see http.ts), authenticated ones use the team's key, as
// an attacker holding any team key would.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { crOnlyCompose, hostileCompose } from '../../test/hardening/support/compose-gen.ts';
import { draw as sample } from '../../test/hardening/support/fuzz.ts';
import {
  anonymousRoute,
  type BodyRoute,
  bodyRoutes,
  hostileBodies,
  hostileHeaders,
} from '../../test/hardening/support/http-gen.ts';
import { hostileTar } from '../../test/hardening/support/tar-gen.ts';
import { badFirstFrames, eventFlood, strayFrames } from './frames.ts';
import { quietStreams, slowRequests } from './held.ts';
import { type Answer, type Client, client, HOSTILE_ADDRESS, KEYED_HOSTILE_ADDRESS } from './http.ts';
import { anyClientError, type Recorder, statusIn } from './record.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const MiB = 1024 * 1024;

/** A refusal: any 4xx (429 included) or a 503. */
const refusal = (a: Answer) => anyClientError(a) || a.status === 503;

export interface HostileOptions {
  /** Services in the CR-only compose file (about 26 bytes each). */
  crEntries: number;
  /** Unpacked size of the small archive bomb (zero blocks, accepted or refused, never slow). */
  bombMiB: number;
  /** Size of the oversize upload (over the 512 MiB limit). */
  oversizeMiB: number;
}

export interface Targets {
  /** A project with an environment and no deployment (the fuzz suites' shape). */
  project: string;
  env: string;
  /** A joined host of another team, for stray frames on an authenticated stream. */
  host: { id: string; secret: string };
  /** Another team's API key: it must see nothing of this team's. */
  otherKey: string;
}

export class Hostile {
  readonly anon: Client;
  readonly keyed: Client;
  #routes: BodyRoute[] = [];
  #pending = new Set<Promise<void>>();

  readonly rec: Recorder;
  readonly t: Targets;
  readonly o: HostileOptions;

  constructor(url: string, key: string, rec: Recorder, t: Targets, o: HostileOptions) {
    this.rec = rec;
    this.t = t;
    this.o = o;
    this.anon = client(url, key, HOSTILE_ADDRESS);
    this.keyed = client(url, key, KEYED_HOSTILE_ADDRESS);
  }

  async setup(): Promise<void> {
    const spec = (await this.keyed.call('GET', '/openapi.json')).body;
    this.#routes = bodyRoutes(spec, {
      project: this.t.project,
      env: this.t.env,
      id: 'key_x',
      name: 'nocloud',
      dep: 'dep_x',
    });
  }

  /** The bursts and their weights (per hostile round). */
  ops(): [string, number, () => Promise<unknown>][] {
    return [
      ['bodies', 6, () => this.bodies(12)],
      ['headers', 4, () => this.headers(12)],
      ['compose', 3, () => this.compose(3)],
      ['tar', 3, () => this.tars(6)],
      ['frames', 3, () => badFirstFrames(this.keyed.url, this.rec, 8)],
      ['frames.joined', 2, () => strayFrames(this.keyed.url, this.t.host, this.rec, 30)],
      ['flood', 2, () => this.flood(80)],
      ['webhook.junk', 2, () => this.webhookJunk(8)],
      ['upload.json', 1, () => this.jsonUpload(8 * MiB)],
      ['slow', 1, async () => slowRequests(this.keyed.url, this.keyed.key, this.rec, 6, this.#pending)],
      ['tenancy', 2, () => this.tenancy()],
      ['blob', 1, () => this.blob(4 * MiB)],
      [
        'events.flood',
        1,
        () =>
          Promise.all([
            quietStreams(this.keyed.url, this.t.otherKey, this.rec, 30, 17_000),
            eventFlood(this.keyed.url, this.t.host, this.rec, 15),
          ]),
      ],
      ['sse.flood', 1, () => quietStreams(this.keyed.url, this.keyed.key, this.rec, 40, 20_000)],
      ['bomb', 1, () => this.bomb(this.o.bombMiB)],
      ['compose.cr', 1, () => this.crCompose()],
      ['upload.oversize', 0.3, () => this.oversize()],
    ];
  }

  /** Waits for the background refusals still running (held connections). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
  }

  /** Another team's key on this team's environment: 404 (or 403) everywhere, never a 2xx. */
  async tenancy() {
    const env = this.t.env;
    const token = this.t.otherKey;
    for (const [method, path, body] of [
      ['GET', `/v1/envs/${env}`, undefined],
      ['POST', `/v1/envs/${env}/exec`, { service: 'main', cmd: ['cat', '/etc/hostname'] }],
      ['GET', `/v1/envs/${env}/files?service=main&path=/work`, undefined],
      ['POST', `/v1/envs/${env}/fork`, { name: 'stolen' }],
      ['GET', `/v1/events?subject=env:${env}`, undefined],
      ['DELETE', `/v1/envs/${env}`, undefined],
    ] as const) {
      const a = await this.keyed.call(method, path, { token, body });
      this.rec.add(
        'h.tenancy',
        'hostile',
        a,
        (x) => refusal(x) || (x.status === 200 && path.startsWith('/v1/events') && !x.body?.events?.length),
      );
    }
  }

  /** A body to an unknown blob: refused before it is read. */
  async blob(bytes: number) {
    const a = await this.keyed.call('PUT', '/v1/hosts/blobs/blob_nothing', {
      raw: Buffer.alloc(bytes, 0x61),
      headers: { 'content-type': 'application/octet-stream' },
    });
    this.rec.add(
      'h.blob',
      'hostile',
      a,
      (x) => refusal(x) || x.error === 'ECONNRESET' || x.error === 'EPIPE',
    );
  }

  async bodies(n: number) {
    for (const { op, text, type } of sample(hostileBodies(this.#routes), n)) {
      const a = await this.keyed.call(op.method, op.path, {
        raw: text,
        token: anonymousRoute(op.path) ? false : undefined,
        headers: { 'content-type': type },
      });
      this.rec.add('h.body', 'hostile', a, anyClientError);
    }
  }

  async headers(n: number) {
    for (const h of sample(hostileHeaders, n)) {
      const a = await this.anon.call(h.method, h.path, {
        raw: h.body || undefined,
        token: false,
        headers: h.headers,
      });
      this.rec.add('h.headers', 'hostile', a, anyClientError);
    }
  }

  async compose(n: number) {
    for (const compose of sample(hostileCompose, n)) {
      const a = await this.keyed.call('POST', `/v1/projects/${this.t.project}/deploy`, { body: { compose } });
      this.rec.add('h.compose', 'hostile', a, statusIn(400, 413, 429));
    }
  }

  /** CR-only line breaks; /health is timed while the server parses it. */
  async crCompose() {
    const compose = crOnlyCompose(this.o.crEntries);
    const refused = this.keyed.call('POST', `/v1/projects/${this.t.project}/deploy`, { body: { compose } });
    await new Promise((r) => setTimeout(r, 200));
    this.rec.add(
      'h.compose.cr /health',
      'work',
      await client(this.keyed.url, '').call('GET', '/health', { token: false }),
    );
    this.rec.add('h.compose.cr', 'hostile', await refused, statusIn(400, 413, 429));
  }

  async tars(n: number) {
    const path = `/v1/envs/${this.t.env}/files?service=main&path=/work`;
    for (const data of sample(hostileTar, n)) {
      const a = await this.keyed.call('PUT', path, {
        raw: data,
        headers: { 'content-type': 'application/x-tar' },
      });
      this.rec.add('h.tar', 'hostile', a, refusal);
    }
  }

  /** Gzipped zero blocks: `mib` MiB unpacked in a few kB. */
  async bomb(mib: number) {
    const zeros = Buffer.alloc(mib * MiB);
    const a = await this.keyed.call('PUT', '/v1/uploads', {
      raw: gzipSync(zeros, { level: 9 }),
      headers: { 'content-type': 'application/gzip' },
    });
    // Zero blocks are an empty archive: storing it is allowed, spending long on it is not (latency).
    this.rec.add('h.bomb', 'hostile', a, (x) => refusal(x) || x.status === 201);
  }

  async jsonUpload(bytes: number) {
    const a = await this.keyed.call('PUT', '/v1/uploads', {
      raw: `{"x":"${'a'.repeat(bytes)}"}`,
      headers: { 'content-type': 'application/json' },
    });
    this.rec.add('h.upload.json', 'hostile', a, refusal);
  }

  async webhookJunk(n: number) {
    const body = Buffer.alloc(MiB, 0x7b);
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        this.anon.call('POST', '/webhooks/codehost', {
          raw: body,
          token: false,
          headers: {
            'content-type': 'application/json',
            'x-github-event': 'push',
            'x-github-delivery': `junk-${i}`,
            ...(i % 2 ? { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` } : {}),
          },
        }),
      ),
    );
    for (const a of answers) this.rec.add('h.webhook.junk', 'hostile', a, refusal);
  }

  /** Bad keys and anonymous device codes from one address: 401s, then 429s; 200s for codes. */
  async flood(n: number) {
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        i % 2
          ? this.anon.call('GET', '/v1/projects', { token: `dak_flood${i}${'x'.repeat(24)}` })
          : this.anon.call('POST', '/v1/device/code', { token: false }),
      ),
    );
    for (const a of answers) this.rec.add('h.flood', 'hostile', a, (x) => refusal(x) || x.status === 200);
  }

  /**
   * One upload past the 512 MiB limit with a valid key, from the test suites' upload client (a
   * process of its own): a 413 expected. What happens to the server afterwards is the plane's to see.
   */
  async oversize() {
    const t0 = performance.now();
    const out = await new Promise<string>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          join(ROOT, 'test/support/upload-client.ts'),
          `${this.keyed.url}/v1/uploads`,
          this.keyed.key,
          String(this.o.oversizeMiB * MiB),
          '1',
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let text = '';
      child.stdout.on('data', (d) => (text += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
      child.on('close', () => {
        clearTimeout(timer);
        resolve(text);
      });
    });
    let status = 0;
    let error: string | null = 'no answer';
    try {
      const r = JSON.parse(out.trim().split('\n')[0]);
      status = r.status ?? 0;
      error = r.error;
    } catch {}
    this.rec.add(
      'h.upload.oversize',
      'hostile',
      {
        status,
        body: null,
        text: out.slice(0, 200),
        ms: performance.now() - t0,
        error: status ? null : error,
      },
      statusIn(413),
    );
  }
}
