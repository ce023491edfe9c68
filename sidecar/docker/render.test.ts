import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import {
  bridgeName,
  composeDocument,
  networkName,
  projectName,
  type RenderInput,
  renderCompose,
} from './render.ts';
import { pickDigest } from './stack.ts';
import { svc } from './testing.ts';

type Doc = {
  services: Record<string, Record<string, unknown>>;
  networks?: { default: Record<string, unknown> };
  volumes?: Record<string, Record<string, unknown>>;
};

function input(over: Partial<RenderInput> = {}): RenderInput {
  return {
    envId: 'env_01ABCdef',
    egress: 'deny',
    volumes: ['data'],
    volumePaths: { data: '/var/lib/svc/envs/env_01ABCdef/vol/data' },
    services: [
      svc('db', 'postgres:16', {
        env: { POSTGRES_PASSWORD: 'pa$$word', PLAIN: 'x' },
        ports: ['5432', '15432:5433/udp'],
        volumes: ['data:/var/lib/postgresql/data'],
        health: {
          test: ['CMD-SHELL', 'pg_isready -U $POSTGRES_USER'],
          interval: '1s',
          retries: 5,
          timeout: '3s',
        },
        command: 'postgres -c fsync=off',
        entrypoint: ['docker-entrypoint.sh'],
        user: '999:999',
        working_dir: '/srv',
        resources: { memory_mb: 512, pids: 0, cpus: 0 },
      }),
      svc('app', 'busybox', {
        depends_on: { db: { condition: 'service_healthy' } },
        resources: { memory_mb: 0, pids: 64, cpus: 8 },
      }),
    ],
    ...over,
  };
}

// What compose itself will read: the YAML text parsed back (interpolation escapes included).
const render = (over: Partial<RenderInput> = {}) => parse(renderCompose(input(over))) as Doc;

describe('render', () => {
  it('names: project is the env id in lower case, network <project>_default, bridge ≤ 15 chars', () => {
    assert.equal(projectName('env_01ABCdef'), 'env_01abcdef');
    assert.equal(networkName('env_01ABCdef'), 'env_01abcdef_default');
    const br = bridgeName('env_01ABCdef');
    assert.match(br, /^svc[0-9a-f]{12}$/);
    assert.notEqual(bridgeName('env_01ABCdeg'), br);
    assert.throws(() => projectName('env with space'), /cannot name a compose project/);
  });

  it('applies resources to every container, zero meaning the defaults, cpus capped to the host', () => {
    const doc = render({ hostCpus: 4 });
    assert.deepEqual(
      [doc.services.db.mem_limit, doc.services.db.pids_limit, doc.services.db.cpus],
      ['512m', 2048, 2],
    );
    assert.deepEqual(
      [doc.services.app.mem_limit, doc.services.app.pids_limit, doc.services.app.cpus],
      ['4096m', 64, 4],
    );
  });

  it('carries user, working_dir, entrypoint, command, env, healthcheck and depends_on conditions', () => {
    const db = render().services.db;
    assert.equal(db.user, '999:999');
    assert.equal(db.working_dir, '/srv');
    assert.deepEqual(db.entrypoint, ['docker-entrypoint.sh']);
    assert.equal(db.command, 'postgres -c fsync=off');
    // `$` is escaped so compose's interpolation gives back the spec's literal value.
    assert.deepEqual(db.environment, { POSTGRES_PASSWORD: 'pa$$$$word', PLAIN: 'x' });
    assert.deepEqual(db.healthcheck, {
      test: ['CMD-SHELL', 'pg_isready -U $$POSTGRES_USER'],
      interval: '1s',
      timeout: '3s',
      retries: 5,
    });
    assert.deepEqual(render().services.app.depends_on, { db: { condition: 'service_healthy' } });
    assert.equal('container_name' in db, false);
    assert.equal('user' in render().services.app, false);
  });

  it('binds every volume to its dataset directory with the local driver', () => {
    const doc = render();
    assert.deepEqual(doc.volumes?.data.driver_opts, {
      type: 'none',
      o: 'bind',
      device: '/var/lib/svc/envs/env_01ABCdef/vol/data',
    });
    assert.equal(doc.volumes?.data.driver, 'local');
    assert.deepEqual(doc.services.db.volumes, ['data:/var/lib/postgresql/data']);
  });

  it('deny: internal network with the derived bridge name and no published ports', () => {
    const doc = render();
    assert.equal(doc.networks?.default.internal, true);
    assert.deepEqual(doc.networks?.default.driver_opts, {
      'com.docker.network.bridge.name': bridgeName('env_01ABCdef'),
    });
    assert.equal('ports' in doc.services.db, false);
  });

  it('allow: normal bridge network and ports published (random host port when none is given)', () => {
    const doc = render({ egress: 'allow' });
    assert.equal(doc.networks?.default.internal, false);
    assert.deepEqual(doc.services.db.ports, ['5432', '15432:5433/udp']);
  });

  it('healthcheck NONE disables the image healthcheck', () => {
    const services = [svc('a', 'busybox', { health: { test: ['NONE'], interval: '', retries: 0 } })];
    assert.deepEqual(render({ services, volumes: [], volumePaths: {} }).services.a.healthcheck, {
      disable: true,
    });
  });

  it('refuses a volume without a dataset path, an undeclared volume and an empty spec', () => {
    assert.throws(
      () => composeDocument(input({ volumePaths: {} })),
      /volume 'data' has no dataset directory/,
    );
    assert.throws(
      () => composeDocument(input({ volumes: [], volumePaths: {} })),
      /mounts volume 'data', which the spec does not declare/,
    );
    assert.throws(() => composeDocument(input({ services: [] })), /no services/);
  });

  it('picks the repo digest of the image reference, else the first', () => {
    const digests = ['docker.io/library/postgres@sha256:aa', 'mirror.example/postgres@sha256:bb'];
    assert.equal(pickDigest('postgres:16', digests), 'docker.io/library/postgres@sha256:aa');
    assert.equal(pickDigest('mirror.example/postgres:16', digests), 'mirror.example/postgres@sha256:bb');
    assert.equal(pickDigest('other', digests), 'docker.io/library/postgres@sha256:aa');
    assert.equal(pickDigest('imported', []), undefined);
  });

  it('hardens every service: no-new-privileges, an init, bounded logs; storage_opt only where the engine bounds layers', () => {
    const withLayer = (layerQuota: boolean) =>
      render({
        layerQuota,
        services: [svc('app', 'busybox', { layer_mb: 512 }), svc('db', 'busybox')],
        volumes: [],
        volumePaths: {},
      });
    const doc = withLayer(true);
    for (const s of Object.values(doc.services)) {
      assert.deepEqual(s.security_opt, ['no-new-privileges:true']);
      assert.equal(s.init, true);
      assert.deepEqual(s.logging, { driver: 'json-file', options: { 'max-size': '10m', 'max-file': '3' } });
    }
    assert.deepEqual(doc.services.app.storage_opt, { size: '512M' });
    assert.equal(doc.services.db.storage_opt, undefined);
    assert.equal(withLayer(false).services.app.storage_opt, undefined);
  });

  it('names the runsc runtime for every service of a gvisor environment, and none under runc', () => {
    const gvisor = parse(renderCompose(input({ runtime: 'gvisor' }))) as Doc;
    for (const svc of Object.values(gvisor.services)) assert.equal(svc.runtime, 'runsc');
    for (const runtime of ['runc', undefined] as const) {
      const doc = parse(renderCompose(input({ runtime }))) as Doc;
      for (const svc of Object.values(doc.services)) assert.equal(svc.runtime, undefined);
    }
  });

  it("network 'none': one deny service with only loopback, no network to render; anything else refused", () => {
    const one = (over: Partial<RenderInput> = {}) =>
      input({ services: [svc('main', 'busybox')], network: 'none', ...over });
    const doc = parse(renderCompose(one())) as Doc;
    assert.equal(doc.networks, undefined, 'no network, so no bridge, subnet or firewall rules');
    assert.equal(doc.services.main.network_mode, 'none');
    assert.equal(render().services.app.network_mode, undefined, 'a stack keeps its network');
    const refused = /network 'none' is for one service with egress 'deny' and no ports/;
    assert.throws(() => renderCompose(one({ egress: 'allow' })), refused);
    assert.throws(() => renderCompose(input({ network: 'none' })), refused);
    assert.throws(
      () => renderCompose(one({ services: [svc('main', 'busybox', { ports: ['80'] })] })),
      refused,
    );
    assert.throws(
      () => renderCompose(one({ network: 'host' as unknown as 'none' })),
      /network must be 'none' when given/,
    );
  });
});
