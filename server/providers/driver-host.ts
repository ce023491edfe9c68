// Driver hosts (spec "Driver behaviour"): commands for an environment on a hosted sandbox provider
// run in-process here, recorded in the same commands table by the dispatcher. This module is the
// part both drivers share: the cloud's opened config, the per-environment provider state, the
// single-service rule, one-file-at-a-time archives, and the refusal wording for what a provider
// lacks (`<provider>: <kind>: not supported on <provider> yet`).
import type { CommandKind, Payloads, Results } from '../../protocol/commands.ts';
import type { Egress, ServiceRecord } from '../../protocol/spec.ts';
import { apiUrlOf, capabilityRow } from '../clouds/providers.ts';
import type { SecretBox } from '../clouds/secret-box.ts';
import { getCloud } from '../clouds/store.ts';
import type { Db } from '../db/types.ts';
import type { CommandTarget, Driver } from '../hosts/dispatcher.ts';
import { getHostRow } from '../hosts/store.ts';
import { fileArchive, regularFiles } from './archive.ts';
import { dropState, getState, type ProviderState, putState } from './state-store.ts';

export const unsupported = (provider: string, kind: string): string =>
  `${provider}: ${kind}: not supported on ${provider} yet`;

export const multiServiceRefusal = (provider: string, n: number): string =>
  `${provider} runs one container per environment; use your machines for multi-service stacks (${n} services declared)`;

/** A cloud as a driver uses it: token and settings opened, API base resolved. */
export interface ProviderCloud {
  id: string;
  provider: string;
  config: Record<string, string>;
  api: string;
}

export interface Created {
  ref: string;
  data: Record<string, string>;
  /** What the provider enforces of the spec's egress, in words (prepare evidence). */
  egress: string;
}

export interface ExecResult {
  exit_code: number;
  stdout: string;
  stderr: string;
}

/** One hosted provider's calls. A missing `snapshot` means env.snapshot is refused. */
export interface SandboxProvider {
  name: string;
  /** One read call that proves the token works; its answer is the connect route's `info`. */
  check(cloud: ProviderCloud): Promise<Record<string, unknown>>;
  create(cloud: ProviderCloud, envId: string, service: ServiceRecord, egress: Egress): Promise<Created>;
  exec(cloud: ProviderCloud, st: ProviderState, argv: string[], timeoutSec: number): Promise<ExecResult>;
  upload(cloud: ProviderCloud, st: ProviderState, path: string, data: Buffer): Promise<void>;
  download(cloud: ProviderCloud, st: ProviderState, path: string): Promise<Buffer>;
  snapshot?(cloud: ProviderCloud, st: ProviderState): Promise<Record<string, string>>;
  destroy(cloud: ProviderCloud, st: ProviderState): Promise<void>;
  /** Ids of the provider's sandboxes labelled with this environment (found by the provider's filter). */
  labelled(cloud: ProviderCloud, envId: string): Promise<string[]>;
}

/**
 * A shell line that starts `"$@"` detached with its output in /tmp/svc-command.log. No nohup:
 * minimal images lack it, and a background process without a terminal gets no hangup anyway.
 */
export const BACKGROUND = '"$@" >/tmp/svc-command.log 2>&1 </dev/null &';

/** The command a service runs, as argv: entrypoint then command (null when the image decides). */
export function serviceArgv(s: ServiceRecord): string[] | null {
  const part = (v: string | string[] | null) =>
    v === null ? [] : Array.isArray(v) ? v : ['/bin/sh', '-c', v];
  const argv = [...part(s.entrypoint), ...part(s.command)];
  return argv.length ? argv : null;
}

export async function openCloud(
  db: Db,
  box: SecretBox,
  teamId: string,
  cloudId: string,
): Promise<ProviderCloud> {
  const c = await getCloud(db, teamId, cloudId);
  if (!c) throw new Error(`cloud ${cloudId} no longer exists`);
  const config = box.openConfig(c.Config);
  return { id: c.ID, provider: c.Provider, config, api: apiUrlOf(c.Provider, config) };
}

export class DriverHost implements Driver {
  #db: Db;
  #box: SecretBox;
  #provider: SandboxProvider;

  constructor(db: Db, box: SecretBox, provider: SandboxProvider) {
    this.#db = db;
    this.#box = box;
    this.#provider = provider;
  }

  async run(target: CommandTarget, envId: string, kind: CommandKind, payload: unknown): Promise<unknown> {
    const name = this.#provider.name;
    const host = await getHostRow(this.#db, target.hostId);
    if (!host) throw new Error(`driver host ${target.hostId} is gone`);
    const cloud = await openCloud(this.#db, this.#box, target.teamId, host.cloud_id);
    switch (kind) {
      case 'host.report':
        return { capabilities: { provider: name, ...capabilityRow(name) } };
      case 'env.create':
        return this.#create(target, cloud, envId, payload as Payloads['env.create']);
      case 'env.exec': {
        const p = payload as Payloads['env.exec'];
        return this.#provider.exec(cloud, await this.#state(envId), p.cmd, p.timeout_sec ?? 120);
      }
      case 'env.put':
        return this.#put(cloud, envId, payload as Payloads['env.put']);
      case 'env.get': {
        const p = payload as Payloads['env.get'];
        const data = await this.#provider.download(cloud, await this.#state(envId), p.path);
        return { tar_b64: (await fileArchive(p.path, data)).toString('base64') };
      }
      case 'env.snapshot':
        return this.#snapshot(cloud, envId, payload as Payloads['env.snapshot']);
      case 'env.destroy': {
        // Also any sandbox labelled with this environment that the state does not name (a create
        // cut off by a timeout or a restart): destroy leaves nothing running at the provider.
        const st = await getState(this.#db, this.#box, envId);
        const refs = new Set([...(st ? [st.ref] : []), ...(await this.#provider.labelled(cloud, envId))]);
        for (const ref of refs)
          await this.#provider.destroy(cloud, st?.ref === ref ? st : ({ ref, data: {} } as never));
        await dropState(this.#db, envId);
        return { destroyed: envId } satisfies Results['env.destroy'];
      }
      default:
        throw new Error(unsupported(name, kind));
    }
  }

  async #state(envId: string): Promise<ProviderState> {
    const st = await getState(this.#db, this.#box, envId);
    if (!st) throw new Error(`${this.#provider.name}: environment ${envId} has no sandbox`);
    return st;
  }

  async #create(target: CommandTarget, cloud: ProviderCloud, envId: string, p: Payloads['env.create']) {
    const name = this.#provider.name;
    if (p.services.length !== 1) throw new Error(multiServiceRefusal(name, p.services.length));
    const started = Date.now();
    // A redeploy replaces the environment's sandbox only once the new one is up: a failed create
    // leaves the old one running, and a replaced one is deleted, never leaked.
    const old = await getState(this.#db, this.#box, envId);
    const made = await this.#provider.create(cloud, envId, p.services[0], p.egress);
    await putState(this.#db, this.#box, {
      envId,
      hostId: target.hostId,
      teamId: target.teamId,
      provider: name,
      ref: made.ref,
      snapshot: '',
      data: made.data,
    });
    if (old) await this.#provider.destroy(cloud, old);
    return {
      endpoints: {},
      started_in: Date.now() - started,
      digests: {},
      storage: name,
      egress: p.egress === 'allow' ? 'allowed' : 'denied (provider)',
      enforcement: made.egress,
      caps: `${name} applies its own tier limits; the spec's memory, pids and cpus caps are not applied`,
      sandbox: made.ref,
    };
  }

  async #put(cloud: ProviderCloud, envId: string, p: Payloads['env.put']) {
    let archive = Buffer.from(p.tar_b64, 'base64');
    if (p.blob) {
      const r = await fetch(p.blob.url, {
        headers: { authorization: `Bearer ${p.blob.token}` },
        signal: AbortSignal.timeout(60_000),
      });
      if (!r.ok) throw new Error(`archive download from the control plane: ${r.status}`);
      archive = Buffer.from(await r.arrayBuffer());
    }
    const st = await this.#state(envId);
    const base = p.path.replace(/\/+$/, '');
    for (const f of await regularFiles(archive, this.#provider.name)) {
      await this.#provider.upload(cloud, st, `${base}/${f.name}`, f.data);
    }
    return { path: p.path };
  }

  async #snapshot(cloud: ProviderCloud, envId: string, p: Payloads['env.snapshot']) {
    const name = this.#provider.name;
    if (!this.#provider.snapshot) throw new Error(unsupported(name, 'env.snapshot'));
    const st = await this.#state(envId);
    const started = Date.now();
    const data = await this.#provider.snapshot(cloud, st);
    await putState(this.#db, this.#box, { ...st, snapshot: p.name, data: { ...st.data, ...data } });
    return {
      snapshot: p.name,
      datasets: [`${name}:${st.ref}`],
      frozen_for: Date.now() - started,
      consistent: true,
    } satisfies Results['env.snapshot'];
  }
}
