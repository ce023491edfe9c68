// Projects (spec "Projects"): a project is created with its `alpha` environment in one
// transaction; it is addressed by name or id, always within the caller's team.

import { requireLinkedInstallation } from '../codehost/codehost.ts';
import type { Db, Queryable } from '../db/types.ts';
import { isUniqueViolation } from '../db/types.ts';
import { type Environment, insertEnv, listEnvs } from '../envs/store.ts';
import { BadRequest, Conflict, NotFound } from '../errors.ts';
import {
  getSource,
  insertSource,
  type ProjectSource,
  parseSourceText,
  patchSource,
  type SourcePatch,
} from './source-store.ts';
import { findProject, insertProject, type Project, type ProjectKind } from './store.ts';

/** Lower case, digits and `-_.`, starting with a letter or digit, at most 63 characters. */
export const PROJECT_NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const ALPHA = 'alpha';

import { MAX_SOURCE_CHARS } from '../../protocol/api/bodies.ts';

export { MAX_SOURCE_CHARS };

export function checkProjectName(name: string): string {
  if (!PROJECT_NAME_RE.test(name)) {
    throw new BadRequest(
      `project name '${name}' must be 1-63 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit`,
    );
  }
  // Projects are addressed by name or id: a name shaped like an id would be ambiguous.
  if (name.startsWith('prj_')) throw new BadRequest(`project name '${name}' must not start with prj_`);
  return name;
}

export async function requireProject(q: Queryable, teamId: string, nameOrId: string): Promise<Project> {
  const p = await findProject(q, teamId, nameOrId);
  if (!p) throw new NotFound(`project '${nameOrId}' not found`);
  return p;
}

export interface NewProject {
  name: string;
  kind?: ProjectKind;
  source?: string;
}

export async function createProject(
  db: Db,
  teamId: string,
  req: NewProject,
): Promise<{ project: Project; environments: Environment[] }> {
  const name = checkProjectName(req.name);
  const source = (req.source ?? '').trim();
  const repo = parseSourceText(source);
  const conflict = () => new Conflict(`a project named '${name}' already exists`);
  try {
    return await db.transaction(async (tx) => {
      if (await findProject(tx, teamId, name)) throw conflict();
      const project = await insertProject(tx, teamId, name, req.kind ?? 'rl-environment', source);
      if (repo) await insertSource(tx, project.ID, repo.repo);
      const alpha = await insertEnv(tx, { projectId: project.ID, teamId, name: ALPHA, stage: ALPHA });
      return { project, environments: [alpha] };
    });
  } catch (err) {
    // Two creates racing past the check meet at the UNIQUE (team_id, name) index.
    if (isUniqueViolation(err)) throw conflict();
    throw err;
  }
}

export async function projectEnvs(db: Db, teamId: string, nameOrId: string): Promise<Environment[]> {
  const p = await requireProject(db, teamId, nameOrId);
  return listEnvs(db, teamId, p.ID);
}

function noSource(p: Project): NotFound {
  return new NotFound(
    `project '${p.Name}' has no source repository (create the project with source '<provider>:<owner>/<repo>')`,
  );
}

export async function projectSource(db: Db, teamId: string, nameOrId: string): Promise<ProjectSource> {
  const p = await requireProject(db, teamId, nameOrId);
  const s = await getSource(db, p.ID);
  if (!s) throw noSource(p);
  return s;
}

export async function updateProjectSource(
  db: Db,
  teamId: string,
  nameOrId: string,
  patch: SourcePatch,
): Promise<ProjectSource> {
  return db.transaction(async (tx) => {
    const p = await requireProject(tx, teamId, nameOrId);
    if (!(await getSource(tx, p.ID))) throw noSource(p);
    if (patch.installation_id) await requireLinkedInstallation(tx, teamId, patch.installation_id);
    await patchSource(tx, p.ID, patch);
    return (await getSource(tx, p.ID)) as ProjectSource;
  });
}
