// Connecting a cloud (POST /v1/clouds) and listing them. Names are unique within a team because
// targets are addressed by cloud name (`POST /v1/targets/{name}/sandboxes`).
import { type Db, isUniqueViolation } from '../db/types.ts';
import { BadRequest, Conflict } from '../errors.ts';
import { type Provider, validateConfig } from './providers.ts';
import type { SecretBox } from './secret-box.ts';
import { type Cloud, findCloudByName, insertCloud, listClouds, masked } from './store.ts';

export const CLOUD_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export interface NewCloud {
  provider: Provider;
  name?: string;
  config?: Record<string, unknown>;
}

/** Validates and records a cloud; the answer is masked. 400 bad config, 409 duplicate name. */
export async function connectCloud(db: Db, box: SecretBox, teamId: string, req: NewCloud): Promise<Cloud> {
  const config = box.sealConfig(validateConfig(req.provider, req.config)) as Record<string, string>;
  const name = req.name?.trim() || req.provider;
  if (!CLOUD_NAME_RE.test(name)) {
    throw new BadRequest(`cloud name '${name}' must be 1-63 characters of letters, digits, '.', '_' and '-'`);
  }
  const duplicate = () => new Conflict(`a cloud named '${name}' already exists: pass another name`);
  const cloud = await db
    .transaction(async (tx) => {
      if (await findCloudByName(tx, teamId, name)) throw duplicate();
      return insertCloud(tx, { teamId, provider: req.provider, name, config });
    })
    .catch((err) => {
      // Two concurrent creates: the unique index refuses the second.
      throw isUniqueViolation(err) ? duplicate() : err;
    });
  return masked(cloud);
}

export async function cloudsOf(db: Db, teamId: string): Promise<Cloud[]> {
  return (await listClouds(db, teamId)).map(masked);
}
