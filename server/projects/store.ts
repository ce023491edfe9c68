// Projects: addressed by name or id everywhere (spec "Conventions" 5), always within a team.
import type { Static } from '@sinclair/typebox';
import { PROJECT_KINDS } from '../../protocol/api/bodies.ts';
import type { Project as ProjectSchema } from '../../protocol/api/records.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { now, type Queryable } from '../db/types.ts';

export { PROJECT_KINDS };
export type ProjectKind = (typeof PROJECT_KINDS)[number];

export type Project = Static<typeof ProjectSchema>;

interface Row {
  id: string;
  team_id: string;
  name: string;
  kind: string;
  source: string;
  created_at: string;
}

const projectOf = (r: Row): Project => ({
  ID: r.id,
  TeamID: r.team_id,
  Name: r.name,
  Kind: r.kind,
  Source: r.source,
  CreatedAt: r.created_at,
});

export async function insertProject(
  q: Queryable,
  teamId: string,
  name: string,
  kind: ProjectKind,
  source: string,
): Promise<Project> {
  const row: Row = { id: newId(PREFIX.project), team_id: teamId, name, kind, source, created_at: now() };
  await q.run(
    'INSERT INTO projects (id, team_id, name, kind, source, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    [row.id, row.team_id, row.name, row.kind, row.source, row.created_at],
  );
  return projectOf(row);
}

/** A project of the team by id or by name; undefined when it is not there (or not the team's). */
export async function findProject(
  q: Queryable,
  teamId: string,
  nameOrId: string,
): Promise<Project | undefined> {
  const r = await q.get<Row>(
    'SELECT * FROM projects WHERE team_id = ? AND (id = ? OR name = ?) ORDER BY (id = ?) DESC',
    [teamId, nameOrId, nameOrId, nameOrId],
  );
  return r && projectOf(r);
}

export async function listProjects(q: Queryable, teamId: string): Promise<Project[]> {
  return (await q.all<Row>('SELECT * FROM projects WHERE team_id = ? ORDER BY created_at, id', [teamId])).map(
    projectOf,
  );
}
