// A project's source repository (spec "Process rules" 5): `<provider>:<owner>/<repo>` text on the
// project, and a project_sources row with the compose path (default docker-compose.yaml), the
// default branch, the linked installation and whether other branches deploy.
import { bool, type Queryable, updateColumns } from '../db/types.ts';
import { BadRequest } from '../errors.ts';

export const DEFAULT_COMPOSE_PATH = 'docker-compose.yaml';

export interface ProjectSource {
  ProjectID: string;
  /** `owner/repo`, as the code host names it in webhooks (`repository.full_name`). */
  Repo: string;
  DefaultBranch: string;
  ComposePath: string;
  InstallationID: number;
  DeployBranches: boolean | null;
  LastDeployedSHA: string;
}

interface Row {
  project_id: string;
  repo: string;
  default_branch: string;
  compose_path: string;
  installation_id: number | string;
  deploy_branches: number | null;
  last_deployed_sha: string;
}

const sourceOf = (r: Row): ProjectSource => ({
  ProjectID: r.project_id,
  Repo: r.repo,
  DefaultBranch: r.default_branch,
  ComposePath: r.compose_path,
  InstallationID: Number(r.installation_id),
  DeployBranches: r.deploy_branches === null ? null : Number(r.deploy_branches) === 1,
  LastDeployedSHA: r.last_deployed_sha,
});

const SOURCE_RE = /^([a-z][a-z0-9-]{0,31}):([A-Za-z0-9][A-Za-z0-9_.-]{0,99})\/([A-Za-z0-9_.-]{1,100})$/;

/** `github:owner/repo` → `{provider, repo: 'owner/repo'}`; null for other free text. */
export function parseSourceText(text: string): { provider: string; repo: string } | null {
  const m = SOURCE_RE.exec(text.trim());
  if (!m || m[3] === '.' || m[3] === '..') return null;
  return { provider: m[1], repo: `${m[2]}/${m[3]}` };
}

export async function insertSource(q: Queryable, projectId: string, repo: string): Promise<void> {
  await q.run('INSERT INTO project_sources (project_id, repo, compose_path) VALUES (?, ?, ?)', [
    projectId,
    repo,
    DEFAULT_COMPOSE_PATH,
  ]);
}

export async function getSource(q: Queryable, projectId: string): Promise<ProjectSource | undefined> {
  const r = await q.get<Row>('SELECT * FROM project_sources WHERE project_id = ?', [projectId]);
  return r && sourceOf(r);
}

/** Request fields of POST .../source. Empty strings and 0 (and null) leave a field unchanged. */
export interface SourcePatch {
  default_branch?: string;
  compose_path?: string;
  installation_id?: number;
  deploy_branches?: boolean | null;
}

export function checkBranch(name: string): string {
  const ok =
    /^[A-Za-z0-9._/-]{1,255}$/.test(name) &&
    !name.includes('..') &&
    !name.includes('//') &&
    !/^[/.-]|[/.]$|\.lock$/.test(name);
  if (!ok) throw new BadRequest(`default_branch '${name}' is not a branch name`);
  return name;
}

export function checkComposePath(path: string): string {
  const parts = path.split('/');
  const ok =
    path.length <= 255 &&
    /^[A-Za-z0-9._/-]+$/.test(path) &&
    parts.every((p) => p !== '' && p !== '.' && p !== '..');
  if (!ok) {
    throw new BadRequest(
      `compose_path '${path}' must be a relative path inside the repository, like docker-compose.yaml or deploy/compose.yaml`,
    );
  }
  return path;
}

export async function patchSource(q: Queryable, projectId: string, p: SourcePatch): Promise<void> {
  await updateColumns(
    q,
    'project_sources',
    {
      default_branch: p.default_branch ? checkBranch(p.default_branch) : undefined,
      compose_path: p.compose_path ? checkComposePath(p.compose_path) : undefined,
      installation_id: p.installation_id || undefined,
      deploy_branches:
        p.deploy_branches === undefined || p.deploy_branches === null ? undefined : bool(p.deploy_branches),
    },
    'project_id = ?',
    [projectId],
  );
}

/** The projects (of every team) whose source is `owner/repo` on the code host `provider`. */
export async function projectsWithRepo(
  q: Queryable,
  provider: string,
  repo: string,
): Promise<{ projectId: string; teamId: string; name: string; source: ProjectSource }[]> {
  const rows = await q.all<Row & { team_id: string; name: string; psource: string }>(
    `SELECT s.*, p.team_id, p.name, p.source AS psource FROM project_sources s JOIN projects p ON p.id = s.project_id
      WHERE LOWER(s.repo) = LOWER(?) ORDER BY p.created_at`,
    [repo],
  );
  return rows
    .filter((r) => r.psource.trim().toLowerCase().startsWith(`${provider}:`))
    .map((r) => ({ projectId: r.project_id, teamId: r.team_id, name: r.name, source: sourceOf(r) }));
}

export async function setLastDeployedSha(q: Queryable, projectId: string, sha: string): Promise<void> {
  await q.run('UPDATE project_sources SET last_deployed_sha = ? WHERE project_id = ?', [sha, projectId]);
}
