// Clouds: a provider credential and its configuration, per team. Secret values (the token) are
// stored sealed by the SecretBox (drivers and provisioners open them), and the config is masked
// in every API answer.
import type { Static } from '@sinclair/typebox';
import type { Cloud as CloudSchema } from '../../protocol/api/records.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { json, now, parseJson, type Queryable } from '../db/types.ts';
import { type CloudConfig, maskConfig } from './providers.ts';

export type Cloud = Static<typeof CloudSchema>;

interface Row {
  id: string;
  team_id: string;
  provider: string;
  name: string;
  config: string;
  created_at: string;
}

const cloudOf = (r: Row): Cloud => ({
  ID: r.id,
  TeamID: r.team_id,
  Provider: r.provider,
  Name: r.name,
  Config: parseJson(r.config, {}),
  CreatedAt: r.created_at,
});

/** The record as the API shows it: secrets replaced by three bullets. */
export const masked = (c: Cloud): Cloud => ({ ...c, Config: maskConfig(c.Config) });

export async function insertCloud(
  q: Queryable,
  c: { teamId: string; provider: string; name: string; config: CloudConfig },
): Promise<Cloud> {
  const row: Row = {
    id: newId(PREFIX.cloud),
    team_id: c.teamId,
    provider: c.provider,
    name: c.name,
    config: json(c.config),
    created_at: now(),
  };
  await q.run(
    'INSERT INTO clouds (id, team_id, provider, name, config, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    [row.id, row.team_id, row.provider, row.name, row.config, row.created_at],
  );
  return cloudOf(row);
}

/** Still sealed: open with `SecretBox.openConfig` in drivers and provisioners, never for an answer. */
export async function getCloud(q: Queryable, teamId: string, id: string): Promise<Cloud | undefined> {
  const r = await q.get<Row>('SELECT * FROM clouds WHERE id = ? AND team_id = ?', [id, teamId]);
  return r && cloudOf(r);
}

export async function findCloudByName(
  q: Queryable,
  teamId: string,
  name: string,
): Promise<Cloud | undefined> {
  const r = await q.get<Row>(
    'SELECT * FROM clouds WHERE team_id = ? AND name = ? ORDER BY created_at LIMIT 1',
    [teamId, name],
  );
  return r && cloudOf(r);
}

/** A target reference: the cloud's name or id; the oldest when several match. */
export async function findCloudByRef(q: Queryable, teamId: string, ref: string): Promise<Cloud | undefined> {
  const r = await q.get<Row>(
    'SELECT * FROM clouds WHERE team_id = ? AND (name = ? OR id = ?) ORDER BY created_at LIMIT 1',
    [teamId, ref, ref],
  );
  return r && cloudOf(r);
}

/** Unmasked, oldest first. */
export async function listClouds(q: Queryable, teamId: string): Promise<Cloud[]> {
  const rows = await q.all<Row>('SELECT * FROM clouds WHERE team_id = ? ORDER BY created_at, id', [teamId]);
  return rows.map(cloudOf);
}
