// The console's API client: same-origin fetches with the session and team headers. Records are
// typed with the server's own definitions (type-only imports, erased from the bundle), so a field
// renamed on the server breaks the console's type check, not a user's page.
import type { Cloud } from '../../server/clouds/store.ts';
import type { Deployment, Phase } from '../../server/deployments/store.ts';
import type { Environment, Version } from '../../server/envs/store.ts';
import type { Event } from '../../server/events/store.ts';
import type { Host } from '../../server/hosts/store.ts';
import type { Target } from '../../server/hosts/targets.ts';
import type { ApiKey, Team, TeamWithRole } from '../../server/identity/store.ts';
import type { User } from '../../server/identity/users.ts';
import type { Project } from '../../server/projects/store.ts';
import type { Template } from '../../server/projects/templates.ts';
import { session } from './session.ts';

export type {
  ApiKey,
  Cloud,
  Deployment,
  Environment,
  Event,
  Host,
  Phase,
  Project,
  Target,
  Team,
  TeamWithRole,
  Template,
  User,
  Version,
};

export interface Me {
  team: Team;
  teams: TeamWithRole[];
  user?: User;
}
export interface Started {
  deployment: Deployment;
  phases: Phase[];
}
export interface ConsoleConfig {
  dev_login: boolean;
  codehost_sign_in: boolean;
}

export class ApiError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Headers for the API: the session, and the chosen team when there is one. */
export function authHeaders(): Record<string, string> {
  const h: Record<string, string> = {};
  const token = session.token();
  if (token) h.authorization = `Bearer ${token}`;
  const team = session.team();
  if (team) h['x-svc-team'] = team;
  return h;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers = authHeaders();
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  const text = await r.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { error: text.slice(0, 200) };
  }
  if (!r.ok) {
    const message = (parsed as { error?: string } | null)?.error ?? `${r.status} ${r.statusText}`;
    // An expired or revoked session signs the console out; a lost team falls back to the first.
    if (r.status === 401 && session.token()) session.signOut();
    if (r.status === 403 && session.team() && path === '/v1/me') session.setTeam('');
    throw new ApiError(r.status, message);
  }
  return parsed as T;
}

const seg = encodeURIComponent;

export const api = {
  config: () => call<ConsoleConfig>('GET', '/app/config.json'),
  devLogin: (email: string, name?: string) =>
    call<{ token: string }>('POST', '/auth/dev-login', { email, ...(name ? { name } : {}) }),
  me: () => call<Me>('GET', '/v1/me'),
  createTeam: (name: string) => call<{ team: Team }>('POST', '/v1/teams', { name }),
  approveDevice: (user_code: string, team_id: string, name?: string) =>
    call<{ approved: true; key_id: string; team_id: string }>('POST', '/v1/device/approve', {
      user_code,
      team_id,
      ...(name ? { name } : {}),
    }),

  templates: () => call<{ kinds: string[]; templates: Template[] }>('GET', '/v1/templates'),
  projects: () => call<{ projects: Project[] }>('GET', '/v1/projects'),
  createProject: (name: string, kind: string) =>
    call<{ project: Project; environments: Environment[] }>('POST', '/v1/projects', { name, kind }),
  projectEnvs: (project: string) =>
    call<{ environments: Environment[] }>('GET', `/v1/projects/${seg(project)}/envs`),
  deploy: (project: string, env: string, compose: string) =>
    call<Started>('POST', `/v1/projects/${seg(project)}/deploy`, { env, compose }),

  env: (id: string) => call<{ environment: Environment; connected: boolean }>('GET', `/v1/envs/${seg(id)}`),
  versions: (id: string) => call<{ versions: Version[] }>('GET', `/v1/envs/${seg(id)}/versions`),
  envDeployments: (id: string) =>
    call<{ deployments: Deployment[] }>('GET', `/v1/envs/${seg(id)}/deployments`),
  fork: (id: string, body: { name?: string; version?: string }) =>
    call<Started>('POST', `/v1/envs/${seg(id)}/fork`, body),
  snapshot: (id: string) => call<Started>('POST', `/v1/envs/${seg(id)}/snapshot`),
  rollback: (id: string, version: string) =>
    call<Started>('POST', `/v1/envs/${seg(id)}/rollback`, { version }),
  destroy: (id: string) => call<{ deployment: Deployment }>('DELETE', `/v1/envs/${seg(id)}`),
  deployment: (id: string) => call<Started>('GET', `/v1/deployments/${seg(id)}`),

  events: (subject: string) =>
    call<{ events: Event[] }>('GET', `/v1/events?subject=${encodeURIComponent(subject)}`),

  hosts: () => call<{ hosts: Host[] }>('GET', '/v1/hosts'),
  targets: () => call<{ targets: Target[] }>('GET', '/v1/targets'),
  joinToken: (cloud_id?: string) =>
    call<{ token: string; expires_in_sec: number; command: string }>(
      'POST',
      '/v1/join-tokens',
      cloud_id ? { cloud_id } : {},
    ),
  clouds: () => call<{ clouds: Cloud[] }>('GET', '/v1/clouds'),
  createCloud: (provider: string, name: string, config: Record<string, string>) =>
    call<{ cloud: Cloud }>('POST', '/v1/clouds', { provider, ...(name ? { name } : {}), config }),

  keys: () => call<{ keys: ApiKey[] }>('GET', '/v1/keys'),
  createKey: (name: string) =>
    call<{ key: ApiKey; api_key: string }>('POST', '/v1/keys', name ? { name } : {}),
  revokeKey: (id: string) => call<{ revoked: true }>('DELETE', `/v1/keys/${seg(id)}`),
};
