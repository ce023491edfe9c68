// The console's API client: the generated TypeScript client (clients/typescript: openapi-fetch over
// the types openapi-typescript makes of /openapi.json), on the same origin, with the session and team
// headers. Paths, parameters, bodies and answers are typed by the server's own declarations, so a
// route or field changed on the server breaks the console's type check, not a user's page.
import { createSvcClient, ok, type paths, SvcError } from '../../clients/typescript/src/index.ts';
import { session } from './session.ts';

type Json<P extends keyof paths, M extends keyof paths[P], S extends number> = paths[P][M] extends {
  responses: { [K in S]: { content: { 'application/json': infer T } } };
}
  ? T
  : never;

export type Me = Json<'/v1/me', 'get', 200>;
export type Team = Me['team'];
export type TeamWithRole = Me['teams'][number];
export type User = NonNullable<Me['user']>;
export type ApiKey = Json<'/v1/keys', 'get', 200>['keys'][number];
export type Project = Json<'/v1/projects', 'get', 200>['projects'][number];
export type Environment = Json<'/v1/envs/{env}', 'get', 200>['environment'];
export type Version = Json<'/v1/envs/{env}/versions', 'get', 200>['versions'][number];
/** One step up a fork's lineage: the environment it was forked from and the version it forked. */
export type Ancestor = Json<'/v1/envs/{env}/lineage', 'get', 200>['ancestors'][number];
export type Started = Json<'/v1/deployments/{dep}', 'get', 200>;
export type Deployment = Started['deployment'];
export type Phase = Started['phases'][number];
export type Event = Json<'/v1/events', 'get', 200>['events'][number];
export type Host = Json<'/v1/hosts', 'get', 200>['hosts'][number];
export type Target = Json<'/v1/targets', 'get', 200>['targets'][number];
export type Cloud = Json<'/v1/clouds', 'get', 200>['clouds'][number];
export type Template = Json<'/v1/templates', 'get', 200>['templates'][number];
export type FsEntry = Json<'/v1/envs/{env}/fs/list', 'get', 200>['entries'][number];
export type ProcessStart = Body<'/v1/envs/{env}/processes'>;

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

/** Same-origin requests with the current session and team on every call. */
const client = createSvcClient({
  server: '',
  fetch: (input: RequestInfo | URL, init?: RequestInit) => {
    const req = new Request(input, init);
    for (const [k, v] of Object.entries(authHeaders())) req.headers.set(k, v);
    return fetch(req, { credentials: 'omit', cache: 'no-store' });
  },
});

/** The answer's data; a failure is an ApiError, and an expired session or lost team is forgotten. */
async function run<T>(
  path: string,
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  try {
    return await ok(call);
  } catch (err) {
    if (!(err instanceof SvcError)) throw err;
    // An expired or revoked session signs the console out; a lost team falls back to the first.
    if (err.status === 401 && session.token()) session.signOut();
    if (err.status === 403 && session.team() && path === '/v1/me') session.setTeam('');
    throw new ApiError(err.status, err.message);
  }
}

type Body<P extends keyof paths> = paths[P] extends {
  post: { requestBody?: { content: { 'application/json': infer B } } };
}
  ? B
  : never;
type CloudProvider = Body<'/v1/clouds'>['provider'];
type ProjectKind = NonNullable<Body<'/v1/projects'>['kind']>;

const env = (id: string) => ({ params: { path: { env: id } } });
const project = (name: string) => ({ params: { path: { project: name } } });

export const api = {
  /** The console's own settings (not an API route). */
  config: async (): Promise<ConsoleConfig> => {
    const r = await fetch('/app/config.json', { credentials: 'omit', cache: 'no-store' });
    if (!r.ok) throw new ApiError(r.status, `${r.status} ${r.statusText}`);
    return (await r.json()) as ConsoleConfig;
  },
  devLogin: (email: string, name?: string) =>
    run('/auth/dev-login', client.POST('/auth/dev-login', { body: { email, ...(name ? { name } : {}) } })),
  me: () => run('/v1/me', client.GET('/v1/me')),
  createTeam: (name: string) => run('/v1/teams', client.POST('/v1/teams', { body: { name } })),
  approveDevice: (user_code: string, team_id: string, name?: string) =>
    run(
      '/v1/device/approve',
      client.POST('/v1/device/approve', { body: { user_code, team_id, ...(name ? { name } : {}) } }),
    ),

  templates: () => run('/v1/templates', client.GET('/v1/templates')),
  projects: () => run('/v1/projects', client.GET('/v1/projects')),
  createProject: (name: string, kind: string) =>
    run('/v1/projects', client.POST('/v1/projects', { body: { name, kind: kind as ProjectKind } })),
  projectEnvs: (name: string) => run('envs', client.GET('/v1/projects/{project}/envs', project(name))),
  deploy: (name: string, envName: string, compose: string) =>
    run(
      'deploy',
      client.POST('/v1/projects/{project}/deploy', { ...project(name), body: { env: envName, compose } }),
    ),

  env: (id: string) => run('env', client.GET('/v1/envs/{env}', env(id))),
  versions: (id: string) => run('versions', client.GET('/v1/envs/{env}/versions', env(id))),
  envDeployments: (id: string) => run('deployments', client.GET('/v1/envs/{env}/deployments', env(id))),
  lineage: (id: string) => run('lineage', client.GET('/v1/envs/{env}/lineage', env(id))),
  fork: async (id: string, body: { name?: string; version?: string }): Promise<Started> => {
    const r = await run('fork', client.POST('/v1/envs/{env}/fork', { ...env(id), body }));
    // Without count the answer is the single fork's, never a fan-out's list.
    if (!('deployment' in r)) throw new ApiError(500, 'fork answered a list of forks to a single fork');
    return r;
  },
  snapshot: (id: string) => run('snapshot', client.POST('/v1/envs/{env}/snapshot', env(id))),
  rollback: (id: string, version: string) =>
    run('rollback', client.POST('/v1/envs/{env}/rollback', { ...env(id), body: { version } })),
  destroy: (id: string) => run('destroy', client.DELETE('/v1/envs/{env}', env(id))),
  deployment: (id: string) =>
    run('deployment', client.GET('/v1/deployments/{dep}', { params: { path: { dep: id } } })),

  events: (subject: string) => run('events', client.GET('/v1/events', { params: { query: { subject } } })),

  hosts: () => run('hosts', client.GET('/v1/hosts')),
  targets: () => run('targets', client.GET('/v1/targets')),
  joinToken: (cloud_id?: string) =>
    run('join', client.POST('/v1/join-tokens', { body: cloud_id ? { cloud_id } : {} })),
  clouds: () => run('clouds', client.GET('/v1/clouds')),
  createCloud: (provider: string, name: string, config: Record<string, string>) =>
    run(
      'clouds',
      client.POST('/v1/clouds', {
        body: { provider: provider as CloudProvider, ...(name ? { name } : {}), config },
      }),
    ),

  startProcess: (id: string, body: ProcessStart) =>
    run('processes', client.POST('/v1/envs/{env}/processes', { ...env(id), body })),
  hangUp: (id: string, pid: string) =>
    run(
      'processes',
      client.POST('/v1/envs/{env}/processes/{pid}/signal', {
        params: { path: { env: id, pid } },
        body: { signal: 'HUP' },
      }),
    ),
  listDir: (id: string, service: string, path: string) =>
    run(
      'fs',
      client.GET('/v1/envs/{env}/fs/list', { params: { path: { env: id }, query: { service, path } } }),
    ),
  stat: (id: string, service: string, path: string) =>
    run(
      'fs',
      client.GET('/v1/envs/{env}/fs/stat', { params: { path: { env: id }, query: { service, path } } }),
    ),

  keys: () => run('keys', client.GET('/v1/keys')),
  createKey: (name: string) => run('keys', client.POST('/v1/keys', { body: name ? { name } : {} })),
  revokeKey: (id: string) => run('keys', client.DELETE('/v1/keys/{id}', { params: { path: { id } } })),
};
