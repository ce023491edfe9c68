// Setting the stage through the real API, and the HTTP load itself: clouds, join tokens,
// environments placed on distinct hosts, and `POST /v1/envs/{env}/exec` requests on a keep-alive
// agent.
//
// Why clouds: a deploy is placed on the team's oldest connected host, so K deploys would all land
// on one host. A sandbox pinned to a manual cloud (`POST /v1/targets/{cloud}/sandboxes`) lands
// on that cloud's host instead, so K clouds with one host each spread the environments (and the
// command load) over K hosts, as real tenants would.
import { Agent, request } from 'node:http';
import type { Fire } from './measure.ts';
import { pool } from './measure.ts';

export const SETUP_CONCURRENCY = 32;
const REQUEST_TIMEOUT_MS = 30_000;

export interface Api {
  url: string;
  key: string;
  call(method: string, path: string, body?: unknown): Promise<any>;
}

export function api(url: string, key: string): Api {
  return {
    url,
    key,
    async call(method, path, body) {
      const r = await fetch(url + path, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text.slice(0, 300)}`);
      return text ? JSON.parse(text) : null;
    },
  };
}

export async function teamId(a: Api): Promise<string> {
  const me = await a.call('GET', '/v1/me');
  const id = me?.team?.ID;
  if (typeof id !== 'string') throw new Error(`GET /v1/me: no team id in ${JSON.stringify(me)}`);
  return id;
}

/** K manual clouds named bench-<i>; returns their ids in order. */
export async function createClouds(a: Api, k: number): Promise<string[]> {
  const names = Array.from({ length: k }, (_, i) => `bench-${i}`);
  return pool(names, SETUP_CONCURRENCY, async (name) => {
    const r = await a.call('POST', '/v1/clouds', { provider: 'manual', name });
    return r.cloud.ID as string;
  });
}

/** N join tokens; token i joins cloud i while there are clouds, the team otherwise. */
export async function mintTokens(a: Api, n: number, cloudIds: string[]): Promise<string[]> {
  const slots = Array.from({ length: n }, (_, i) => cloudIds[i]);
  return pool(slots, SETUP_CONCURRENCY, async (cloud) => {
    const r = await a.call('POST', '/v1/join-tokens', cloud ? { cloud_id: cloud } : {});
    return r.token as string;
  });
}

export interface Placed {
  envId: string;
  hostId: string;
}

/** One running image sandbox per cloud, each on that cloud's host. */
export async function createEnvs(a: Api, k: number): Promise<Placed[]> {
  const clouds = Array.from({ length: k }, (_, i) => i);
  return pool(clouds, SETUP_CONCURRENCY / 2, async (i) => {
    const r = await a.call('POST', `/v1/targets/bench-${i}/sandboxes`, {
      image: 'alpine:3.20',
      cmd: ['sleep', 'infinity'],
      name: `bench-${i}`,
      timeout_sec: 120,
    });
    return { envId: r.environment.ID as string, hostId: r.environment.HostID as string };
  });
}

/**
 * `n` API keys of the team: the caller's, then new ones (`POST /v1/keys`). A credential may send
 * 60,000 requests a minute (server/http/limits.ts), so a load above that spreads over several.
 */
export async function mintKeys(a: Api, n: number): Promise<string[]> {
  const more = Array.from({ length: Math.max(0, n - 1) }, (_, i) => `bench-${i}`);
  const minted = await pool(more, SETUP_CONCURRENCY, async (name) => {
    const r = await a.call('POST', '/v1/keys', { name });
    return r.api_key as string;
  });
  return [a.key, ...minted];
}

/**
 * One `POST /v1/envs/{env}/exec` on `agent`; resolves with the status and the body's text, rejects
 * when there is no answer (a socket error, `signal`, or `timeoutMs` of silence on the socket).
 */
export function postExec(o: {
  agent: Agent;
  url: string;
  envId: string;
  headers: Record<string, string | number>;
  body: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(o.url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent: o.agent,
        hostname,
        port,
        method: 'POST',
        path: `/v1/envs/${o.envId}/exec`,
        headers: o.headers,
        timeout: o.timeoutMs,
        signal: o.signal,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${(o.timeoutMs ?? 0) / 1000} s`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

/**
 * `POST /v1/envs/{env}/exec` on the environments in turn, the keys in turn (default: the api's
 * own); ok means a 200 with an exit code.
 */
export function execFire(
  a: Api,
  envs: Placed[],
  sockets: number,
  keys: string[] = [a.key],
): { fire: Fire; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
  const body = JSON.stringify({ service: 'main', cmd: ['true'], timeout_sec: 20 });
  const headerSets = keys.map((key) => ({
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  }));
  const fire: Fire = async (i) => {
    const r = await postExec({
      agent,
      url: a.url,
      envId: envs[i % envs.length].envId,
      headers: headerSets[i % headerSets.length],
      body,
      timeoutMs: REQUEST_TIMEOUT_MS,
    });
    if (r.status !== 200 || !r.text.includes('"exit_code":0'))
      throw new Error(`${r.status} ${r.text.slice(0, 100)}`);
  };
  return { fire, close: () => agent.destroy() };
}
