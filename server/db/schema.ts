// The schema, as ordered migrations. Types are portable: ids and timestamps are TEXT (ISO 8601),
// booleans INTEGER 0/1, JSON documents TEXT. Secrets are stored only as sha256 hashes.
import type { Migration } from './migrate.ts';

const v1: Migration = {
  version: 1,
  name: 'initial schema',
  up: () => [
    `CREATE TABLE teams (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL)`,
    `CREATE TABLE users (id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, login TEXT NOT NULL DEFAULT '',
      name TEXT NOT NULL DEFAULT '', codehost_id TEXT UNIQUE, created_at TEXT NOT NULL)`,
    `CREATE TABLE memberships (team_id TEXT NOT NULL REFERENCES teams(id), user_id TEXT NOT NULL REFERENCES users(id),
      role TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (team_id, user_id))`,
    `CREATE TABLE api_keys (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), name TEXT NOT NULL,
      created_by TEXT NOT NULL, key_hash TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL, last_used_at TEXT,
      revoked_at TEXT)`,
    `CREATE INDEX api_keys_team ON api_keys (team_id)`,
    `CREATE TABLE sessions (token_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id),
      created_at TEXT NOT NULL, expires_at TEXT NOT NULL)`,
    `CREATE TABLE device_codes (code_hash TEXT PRIMARY KEY, user_code_hash TEXT NOT NULL UNIQUE, status TEXT NOT NULL,
      team_id TEXT, key_id TEXT, created_at TEXT NOT NULL, expires_at TEXT NOT NULL)`,
    `CREATE TABLE projects (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), name TEXT NOT NULL,
      kind TEXT NOT NULL, source TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, UNIQUE (team_id, name))`,
    `CREATE TABLE project_sources (project_id TEXT PRIMARY KEY REFERENCES projects(id), repo TEXT NOT NULL,
      default_branch TEXT NOT NULL DEFAULT '', compose_path TEXT NOT NULL DEFAULT 'docker-compose.yaml',
      installation_id INTEGER NOT NULL DEFAULT 0, deploy_branches INTEGER, last_deployed_sha TEXT NOT NULL DEFAULT '')`,
    `CREATE TABLE environments (id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES projects(id),
      team_id TEXT NOT NULL, name TEXT NOT NULL, stage TEXT NOT NULL, host_id TEXT NOT NULL DEFAULT '',
      parent_version_id TEXT NOT NULL DEFAULT '', current_version_id TEXT NOT NULL DEFAULT '',
      status TEXT NOT NULL, endpoints TEXT NOT NULL DEFAULT '{}', created_at TEXT NOT NULL, UNIQUE (project_id, name))`,
    `CREATE INDEX environments_team ON environments (team_id)`,
    `CREATE TABLE versions (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, env_id TEXT NOT NULL, number INTEGER NOT NULL,
      spec TEXT NOT NULL, snapshot TEXT NOT NULL DEFAULT '', healthy INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL)`,
    `CREATE INDEX versions_env ON versions (env_id, number)`,
    `CREATE TABLE deployments (id TEXT PRIMARY KEY, team_id TEXT NOT NULL, project_id TEXT NOT NULL, env_id TEXT NOT NULL,
      kind TEXT NOT NULL, status TEXT NOT NULL, version_id TEXT NOT NULL DEFAULT '', target_env_id TEXT NOT NULL DEFAULT '',
      params TEXT NOT NULL DEFAULT '{}', error TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL, finished_at TEXT)`,
    `CREATE INDEX deployments_env ON deployments (env_id)`,
    `CREATE INDEX deployments_status ON deployments (status)`,
    `CREATE TABLE phases (deployment_id TEXT NOT NULL REFERENCES deployments(id), seq INTEGER NOT NULL, name TEXT NOT NULL,
      status TEXT NOT NULL, evidence TEXT, error TEXT NOT NULL DEFAULT '', started_at TEXT, finished_at TEXT,
      PRIMARY KEY (deployment_id, seq))`,
    `CREATE TABLE clouds (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), provider TEXT NOT NULL,
      name TEXT NOT NULL, config TEXT NOT NULL DEFAULT '{}', created_at TEXT NOT NULL)`,
    `CREATE INDEX clouds_team ON clouds (team_id)`,
    `CREATE TABLE join_tokens (token_hash TEXT PRIMARY KEY, team_id TEXT NOT NULL, cloud_id TEXT NOT NULL DEFAULT '',
      created_at TEXT NOT NULL, expires_at TEXT NOT NULL, used_at TEXT, host_id TEXT NOT NULL DEFAULT '')`,
    `CREATE TABLE hosts (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), cloud_id TEXT NOT NULL DEFAULT '',
      name TEXT NOT NULL, status TEXT NOT NULL, provider_ref TEXT NOT NULL DEFAULT '', secret_hash TEXT NOT NULL DEFAULT '',
      last_seen_at TEXT, created_at TEXT NOT NULL, capabilities TEXT NOT NULL DEFAULT '{}', kind TEXT NOT NULL DEFAULT 'sidecar')`,
    `CREATE INDEX hosts_team ON hosts (team_id)`,
    `CREATE TABLE commands (id TEXT PRIMARY KEY, host_id TEXT NOT NULL, env_id TEXT NOT NULL DEFAULT '', team_id TEXT NOT NULL,
      kind TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL, result TEXT, error TEXT NOT NULL DEFAULT '',
      created_at TEXT NOT NULL, acked_at TEXT, finished_at TEXT)`,
    `CREATE INDEX commands_host_status ON commands (host_id, status)`,
    `CREATE TABLE events (id TEXT PRIMARY KEY, team_id TEXT NOT NULL, subject TEXT NOT NULL, kind TEXT NOT NULL,
      body TEXT NOT NULL DEFAULT 'null', at TEXT NOT NULL)`,
    `CREATE INDEX events_subject ON events (team_id, subject, id)`,
    `CREATE TABLE installations (installation_id INTEGER PRIMARY KEY, team_id TEXT NOT NULL DEFAULT '',
      account_login TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL)`,
  ],
};

// Targets are addressed by cloud name, so a name is unique in its team (checked in code too;
// the index closes the race between two concurrent creates).
const v2: Migration = {
  version: 2,
  name: 'unique cloud names per team',
  up: () => ['CREATE UNIQUE INDEX clouds_team_name ON clouds (team_id, name)'],
};

// Provider tokens are encrypted at rest: existing cloud rows get their secret values
// sealed. Driver hosts keep per-environment provider state (sandbox id, snapshot id, the
// sandbox's own access token), sealed as one document.
const v4: Migration = {
  version: 4,
  name: 'provider tokens encrypted at rest; per-environment provider state',
  up: () => [
    `CREATE TABLE provider_state (env_id TEXT PRIMARY KEY, host_id TEXT NOT NULL, team_id TEXT NOT NULL,
      provider TEXT NOT NULL, ref TEXT NOT NULL DEFAULT '', snapshot TEXT NOT NULL DEFAULT '',
      sealed TEXT NOT NULL DEFAULT '', updated_at TEXT NOT NULL)`,
  ],
  data: async (tx, ctx) => {
    const rows = await tx.all<{ id: string; config: string }>('SELECT id, config FROM clouds');
    for (const r of rows) {
      const config = JSON.parse(r.config) as Record<string, unknown>;
      if (!ctx.sealConfig) {
        if (Object.keys(config).some((k) => /token|secret|key/i.test(k)))
          throw new Error('clouds hold provider tokens: set SVC_SECRETS_KEY so they can be encrypted');
        continue;
      }
      await tx.run('UPDATE clouds SET config = ? WHERE id = ?', [
        JSON.stringify(ctx.sealConfig(config)),
        r.id,
      ]);
    }
  },
};

// Push-to-deploy: webhook deliveries already handled (by X-GitHub-Delivery, so a redelivery deploys
// nothing twice) and the check run posted for each deployment a push started.
const v5: Migration = {
  version: 5,
  name: 'code-hosting deliveries and check runs',
  up: () => [
    `CREATE TABLE codehost_deliveries (delivery_id TEXT PRIMARY KEY, event TEXT NOT NULL, answer TEXT NOT NULL DEFAULT '',
      received_at TEXT NOT NULL)`,
    `CREATE TABLE codehost_check_runs (deployment_id TEXT PRIMARY KEY, installation_id INTEGER NOT NULL,
      repo TEXT NOT NULL, check_run_id INTEGER NOT NULL, conclusion TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL)`,
  ],
};

// The live event stream (server/events/stream.ts) without a subject reads a team's events after an
// id: (team_id, subject, id) cannot serve that range, so without this index every read would scan
// and sort all of the team's events.
const v10: Migration = {
  version: 10,
  name: 'events by team in id order',
  up: () => ['CREATE INDEX events_team ON events (team_id, id)'],
};

// Warm pools (server/pool): a version's pool size, and the forks kept ready for it.
const v7: Migration = {
  version: 7,
  name: 'warm pools',
  up: () => [
    `CREATE TABLE pools (version_id TEXT PRIMARY KEY, team_id TEXT NOT NULL, size INTEGER NOT NULL,
      created_at TEXT NOT NULL)`,
    `CREATE TABLE pool_members (env_id TEXT PRIMARY KEY, version_id TEXT NOT NULL, team_id TEXT NOT NULL,
      deployment_id TEXT NOT NULL DEFAULT '', ready INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL)`,
    'CREATE INDEX pool_members_version ON pool_members (version_id, ready, created_at)',
  ],
};

// Project contexts (PUT /v1/uploads) live on disk; the row ties the bytes to a team. A version
// records the image digests its deploy ran (build: images by id), so a grading record can name them.
const v6: Migration = {
  version: 6,
  name: 'uploads and version digests',
  up: () => [
    `CREATE TABLE uploads (id TEXT PRIMARY KEY, team_id TEXT NOT NULL, sha256 TEXT NOT NULL, bytes INTEGER NOT NULL,
      created_at TEXT NOT NULL)`,
    'CREATE INDEX uploads_team ON uploads (team_id)',
    `ALTER TABLE versions ADD COLUMN digests TEXT NOT NULL DEFAULT '{}'`,
  ],
};

// Uploads are collected once nothing live refers to them (server/uploads/sweep.ts): `used_at` is
// when a deploy last named one (or the same bytes were uploaded again), so an old upload a deploy
// just picked up is kept for the grace period; the same bytes of a team are stored once.
const v8: Migration = {
  version: 8,
  name: 'upload collection',
  up: () => [
    `ALTER TABLE uploads ADD COLUMN used_at TEXT NOT NULL DEFAULT ''`,
    'CREATE INDEX uploads_created ON uploads (created_at)',
    'CREATE INDEX uploads_digest ON uploads (team_id, sha256)',
  ],
};

// Nothing reads commands by (host_id, status), and the index cost a third of every command's row
// writes (the insert, and the status change of its result) on the exec hot path.
const v11: Migration = {
  version: 11,
  name: 'no commands_host_status index',
  up: () => ['DROP INDEX IF EXISTS commands_host_status'],
};

// Linking an installation asks the code host which installations the signed-in user can see, with
// the user's own token from sign-in: kept sealed (AES-256-GCM, like provider tokens), one per user.
// A push deploys a commit to a project's branch once: the delivery id is not signed, so a replayed
// push with a new one must find the commit already deployed. Installation ids are any positive
// safe integer the code host sends, past Postgres's 32-bit INTEGER (SQLite's is 64-bit already).
const v12: Migration = {
  version: 12,
  name: 'code-host user tokens, deployed commits, 64-bit installation ids',
  up: (d) => [
    `CREATE TABLE codehost_user_tokens (user_id TEXT PRIMARY KEY REFERENCES users(id), sealed TEXT NOT NULL,
      updated_at TEXT NOT NULL)`,
    `CREATE TABLE codehost_pushed_commits (project_id TEXT NOT NULL, branch TEXT NOT NULL, sha TEXT NOT NULL,
      created_at TEXT NOT NULL, PRIMARY KEY (project_id, branch, sha))`,
    ...(d.name === 'postgres'
      ? [
          'ALTER TABLE installations ALTER COLUMN installation_id TYPE BIGINT',
          'ALTER TABLE project_sources ALTER COLUMN installation_id TYPE BIGINT',
          'ALTER TABLE codehost_check_runs ALTER COLUMN installation_id TYPE BIGINT',
          // GitHub's check run ids are past 2^31 already.
          'ALTER TABLE codehost_check_runs ALTER COLUMN check_run_id TYPE BIGINT',
        ]
      : []),
  ],
};

// The E2B-compatible surface (server/e2b): each E2B sandbox is an svc environment with its own
// envd access token (a sha256 hash to check it, and sealed to hand it again on get and connect), its metadata, state and the time it ends.
const v13: Migration = {
  version: 13,
  name: 'E2B-compatible sandboxes',
  up: () => [
    `CREATE TABLE e2b_sandboxes (id TEXT PRIMARY KEY, team_id TEXT NOT NULL, env_id TEXT NOT NULL,
      template_id TEXT NOT NULL, token_hash TEXT NOT NULL, token_sealed TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
      state TEXT NOT NULL, started_at TEXT NOT NULL, end_at TEXT NOT NULL)`,
    'CREATE INDEX e2b_sandboxes_team ON e2b_sandboxes (team_id, started_at)',
    'CREATE INDEX e2b_sandboxes_end ON e2b_sandboxes (state, end_at)',
  ],
};

// Several control-plane replicas share nothing but the database, so what one process kept in its
// memory between two requests lives here: named leases (one replica at a time runs a periodic
// job), console sign-in states (hashed), rate windows that must count across replicas, the device
// flow's approved key (sealed to the device code: only the CLI's poll can open it), and the one-time
// blob tokens (hashed) with the replica that holds each blob's bytes. Times are ISO 8601 text, which
// sorts as it compares.
const v15: Migration = {
  version: 15,
  name: 'state shared by control-plane replicas',
  up: () => [
    'CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, until TEXT NOT NULL)',
    `CREATE TABLE oauth_states (state_hash TEXT PRIMARY KEY, return_to TEXT NOT NULL, expires_at TEXT NOT NULL)`,
    'CREATE INDEX oauth_states_expires ON oauth_states (expires_at)',
    'CREATE TABLE rate_windows (key TEXT PRIMARY KEY, count INTEGER NOT NULL, reset_at TEXT NOT NULL)',
    'CREATE INDEX rate_windows_reset ON rate_windows (reset_at)',
    `ALTER TABLE device_codes ADD COLUMN seal_pub TEXT NOT NULL DEFAULT ''`,
    `ALTER TABLE device_codes ADD COLUMN sealed_key TEXT NOT NULL DEFAULT ''`,
    `ALTER TABLE device_codes ADD COLUMN held_until TEXT NOT NULL DEFAULT ''`,
    `CREATE TABLE blob_tokens (id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, direction TEXT NOT NULL,
      holder_url TEXT NOT NULL, expires_at TEXT NOT NULL)`,
    'CREATE INDEX blob_tokens_expires ON blob_tokens (expires_at)',
  ],
};

// Several replicas on one database (server/cluster): each process is a replica row with a lease
// (lease_until, on the database's clock, in ms) its heartbeat renews; a sidecar host's stream is
// held by one replica (host_locations; its lease is its replica's). A command row names the replica
// waiting for its outcome (origin) and the one that wrote it to the host's stream for it (holder,
// set once: a command goes to a host at most once), and the type of a failure, so the origin can
// raise the same error the holder saw.
const v14: Migration = {
  version: 14,
  name: 'replicas, host locations, command routing',
  up: () => [
    `CREATE TABLE replicas (id TEXT PRIMARY KEY, hostname TEXT NOT NULL DEFAULT '', pid INTEGER NOT NULL DEFAULT 0,
      url TEXT NOT NULL DEFAULT '', started_at TEXT NOT NULL, lease_until BIGINT NOT NULL)`,
    `CREATE TABLE host_locations (host_id TEXT PRIMARY KEY, replica_id TEXT NOT NULL, team_id TEXT NOT NULL,
      cloud_id TEXT NOT NULL DEFAULT '', since TEXT NOT NULL)`,
    'CREATE INDEX host_locations_replica ON host_locations (replica_id)',
    `ALTER TABLE commands ADD COLUMN origin TEXT NOT NULL DEFAULT ''`,
    `ALTER TABLE commands ADD COLUMN holder TEXT NOT NULL DEFAULT ''`,
    `ALTER TABLE commands ADD COLUMN error_type TEXT NOT NULL DEFAULT ''`,
  ],
};

// Several control-plane replicas share one Postgres: each unfinished deployment has an owner replica
// and a lease it renews while it lives (another adopts the deployment once the lease lapses), and
// one environment never has two deployments running at once, whichever replicas run them (the
// partial unique index makes that a fact of the database, not of one process's queue). Rows a
// previous version left running two at a time for one environment (a restart set every unfinished
// deployment running) are put back to pending, oldest first kept, before the index is built.
const v16: Migration = {
  version: 16,
  name: 'deployment owners and leases; one running deployment per environment',
  up: () => [
    `ALTER TABLE deployments ADD COLUMN owner TEXT NOT NULL DEFAULT ''`,
    'ALTER TABLE deployments ADD COLUMN lease_until TEXT',
    `UPDATE deployments SET status = 'pending' WHERE status = 'running' AND EXISTS (SELECT 1 FROM deployments o
      WHERE o.env_id = deployments.env_id AND o.status = 'running'
      AND (o.created_at < deployments.created_at OR (o.created_at = deployments.created_at AND o.id < deployments.id)))`,
    `CREATE UNIQUE INDEX deployments_running_env ON deployments (env_id) WHERE status = 'running'`,
    // Each replica renews its leases often: it finds its own unfinished deployments without a scan.
    'CREATE INDEX deployments_owner ON deployments (owner) WHERE finished_at IS NULL',
  ],
};

// The envd process numbers of E2B sandboxes (envd names processes by uint32 pids, svc by `proc_…`
// ids), with the tag and config a caller gave: in the database, not one replica's memory, so a
// process started through one replica is found by pid or tag through any other. Pids are handed
// out from the sandbox's row (`next_pid`, one UPDATE … RETURNING), never twice in a sandbox.
const v18: Migration = {
  version: 18,
  name: 'E2B sandboxes: envd process numbers shared by replicas',
  up: () => [
    'ALTER TABLE e2b_sandboxes ADD COLUMN next_pid INTEGER NOT NULL DEFAULT 1',
    `CREATE TABLE e2b_processes (sandbox_id TEXT NOT NULL, pid INTEGER NOT NULL, proc TEXT NOT NULL,
      tag TEXT NOT NULL DEFAULT '', config TEXT NOT NULL, tty INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (sandbox_id, pid))`,
    'CREATE UNIQUE INDEX e2b_processes_proc ON e2b_processes (sandbox_id, proc)',
  ],
};

export const MIGRATIONS: readonly Migration[] = [
  v1,
  v2,
  v4,
  v5,
  v6,
  v7,
  v8,
  v10,
  v11,
  v12,
  v13,
  v14,
  v15,
  v16,
  v18,
];
