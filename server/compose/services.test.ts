import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bareService, parses, refuses, service } from './testing.ts';

const one = (body: string) => `services:\n  web:\n    image: nginx:1.27\n${body}`;

describe('compose services', () => {
  it('produces a full ServiceRecord with defaults', () => {
    const { spec, warnings } = parses('services:\n  web:\n    image: nginx\n');
    assert.deepEqual(spec, {
      services: [bareService('web', 'nginx')],
      volumes: [],
      egress: 'deny',
      agent: null,
      verifier: null,
      disk_mb: 10_240,
    });
    assert.deepEqual(warnings, []);
  });

  it('accepts image references of every shape and refuses malformed ones', () => {
    for (const image of [
      'redis',
      'redis:7-alpine',
      'library/redis',
      'ghcr.io/org/team/app:v1.2.3',
      'localhost:5000/app',
      'registry.example.com:4000/postgresql',
      'index.docker.io/sourcegraph/migrator:6.1@sha256:67b5b187f006bb789898cd1ab02fd82f860fe1511524a416ba63ee71ebd603c6',
      'busybox@sha256:38a203e1986cf79639cfb9b2e1d6e773de84002feea2d4eb006b52004ee8502d',
      'a4bc65fd',
    ]) {
      assert.equal(service(`services:\n  a:\n    image: "${image}"\n`).image, image);
    }
    for (const image of ['Redis', 'redis:', 'redis::7', 'a b', '-x', 'redis@sha256:short', 'http://x/y']) {
      refuses(`services:\n  a:\n    image: "${image}"\n`, "service 'a': image", 'not an image reference');
    }
    refuses('services:\n  a:\n    image: "elasticsearch:"\n', 'is a variable unset?');
    refuses('services:\n  a:\n    image: ""\n', "service 'a': image: is empty");
  });

  it('uses image: when build: is present too, with a warning', () => {
    const { spec, warnings } = parses(one('    build: ./app\n'));
    assert.equal(spec.services[0].image, 'nginx:1.27');
    assert.ok(warnings.some((w) => w.includes("service 'web': build: ignored")));
  });

  it('takes command and entrypoint as string or list', () => {
    const a = service(one('    command: nginx -g "daemon off;"\n    entrypoint: [/bin/sh, -c]\n'));
    assert.equal(a.command, 'nginx -g "daemon off;"');
    assert.deepEqual(a.entrypoint, ['/bin/sh', '-c']);
    const b = service(one('    command: [sleep, 10, true]\n'));
    assert.deepEqual(b.command, ['sleep', '10', 'true']);
    refuses(one('    command: {a: b}\n'), "service 'web': command");
    refuses(one('    command: [[a]]\n'), "service 'web': command[0]");
  });

  it('reads environment as a map or a list and drops pass-through keys', () => {
    const m = parses(
      one('    environment:\n      A: x\n      N: 42\n      B: true\n      PASS:\n      dotted.key: v\n'),
    );
    assert.deepEqual(m.spec.services[0].env, { A: 'x', N: '42', B: 'true', 'dotted.key': 'v' });
    assert.ok(m.warnings.some((w) => w.includes("service 'web': environment: dropped PASS")));
    const l = parses(
      one('    environment:\n      - A=x=y\n      - EMPTY=\n      - PASS\n      - "A2= spaced "\n'),
    );
    assert.deepEqual(l.spec.services[0].env, { A: 'x=y', EMPTY: '', A2: ' spaced ' });
    assert.ok(l.warnings.some((w) => w.includes('dropped PASS')));
    refuses(one('    environment:\n      - =x\n'), "service 'web': environment", 'not a variable name');
    refuses(one('    environment:\n      A: [1]\n'), "service 'web': environment.A");
    refuses(one('    environment: text\n'), "service 'web': environment must be a mapping");
  });

  it('stringifies the user and checks its shape', () => {
    assert.equal(service(one('    user: 1000\n')).user, '1000');
    assert.equal(service(one('    user: "1000:1000"\n')).user, '1000:1000');
    assert.equal(service(one('    user: postgres\n')).user, 'postgres');
    refuses(one('    user: "a b"\n'), "service 'web': user");
    refuses(one('    user: "1:2:3"\n'), "service 'web': user");
  });

  it('normalises an absolute working_dir and refuses a relative one', () => {
    assert.equal(service(one('    working_dir: /app/\n')).working_dir, '/app');
    refuses(one('    working_dir: app\n'), "service 'web': working_dir", 'absolute');
  });

  it('reads depends_on lists and maps with conditions', () => {
    const { spec } = parses(`services:
  web:
    image: nginx
    depends_on: [db, cache, db]
  db:
    image: postgres
    depends_on:
      cache:
        condition: service_healthy
        restart: true
      init:
        condition: service_completed_successfully
  cache: {image: redis}
  init:
    image: busybox
    depends_on:
      cache:
`);
    assert.deepEqual(spec.services[0].depends_on, {
      db: { condition: 'service_started' },
      cache: { condition: 'service_started' },
    });
    assert.deepEqual(spec.services[1].depends_on, {
      cache: { condition: 'service_healthy' },
      init: { condition: 'service_completed_successfully' },
    });
    assert.deepEqual(spec.services[3].depends_on, { cache: { condition: 'service_started' } });
  });

  it('refuses depends_on on missing services, bad conditions, itself and cycles', () => {
    refuses(
      'services:\n  a:\n    image: x\n    depends_on: [b]\n',
      "service 'a': depends_on",
      "'b' does not exist",
    );
    refuses(
      'services:\n  a:\n    image: x\n    depends_on:\n      b: {condition: service_ready}\n  b: {image: x}\n',
      "service 'a': depends_on.b.condition",
    );
    refuses('services:\n  a:\n    image: x\n    depends_on: [a]\n', "service 'a'", 'itself');
    refuses(
      'services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [c]}\n  c: {image: x, depends_on: [a]}\n',
      'cycle: a -> b -> c -> a',
    );
  });

  it('drops an optional dependency on a missing service', () => {
    const { spec, warnings } = parses(
      'services:\n  a:\n    image: x\n    depends_on:\n      b: {required: false}\n',
    );
    assert.deepEqual(spec.services[0].depends_on, {});
    assert.ok(warnings.some((w) => w.includes("dropped 'b'")));
  });

  it('leaves services behind profiles out, with a warning', () => {
    const { spec, warnings } = parses(`services:
  web: {image: nginx}
  seed:
    build: ./seed
    profiles: [seed]
    network_mode: host
    depends_on: [web]
`);
    assert.deepEqual(
      spec.services.map((s) => s.name),
      ['web'],
    );
    assert.ok(warnings.includes('left out services behind profiles: seed'));
    refuses(
      'services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, profiles: [dev]}\n',
      "'b' is left out by its profiles",
    );
    refuses('services:\n  a: {image: x, profiles: [dev]}\n', 'every service is behind profiles');
  });

  it('checks service names and the services mapping', () => {
    refuses('services:\n  "bad name": {image: x}\n', "service name 'bad name'");
    refuses('services:\n  -x: {image: x}\n', "service name '-x'");
    refuses(`services:\n  ${'a'.repeat(64)}: {image: x}\n`, 'at most 63');
    refuses('services: {}\n', 'no services');
    refuses('version: "3"\n', 'no services');
    refuses('services: [a, b]\n', 'services must be a mapping');
    refuses('services:\n  a:\n', "service 'a' is empty");
    refuses('services:\n  a: redis\n', "service 'a' must be a mapping");
    refuses('services:\n  a: {command: x}\n', "service 'a' has no image");
    const many = Array.from({ length: 501 }, (_, i) => `  s${i}: {image: x}\n`).join('');
    refuses(`services:\n${many}`, 'the limit is 500');
  });

  it('drops keys the sidecar manages, naming them in one warning', () => {
    const { warnings } = parses(
      one(
        '    restart: always\n    container_name: web-1\n    networks: [front]\n    expose: [80]\n' +
          '    labels: {a: b}\n    logging: {driver: json-file}\n    stdin_open: true\n    tty: true\n' +
          '    init: true\n    stop_grace_period: 20s\n    hostname: web\n    ulimits: {nofile: 1024}\n' +
          '    x-note: hi\n    privileged: false\n    network_mode: bridge\n',
      ),
    );
    const w = warnings.find((x) => x.startsWith("service 'web': dropped"));
    assert.ok(w);
    for (const key of [
      'restart',
      'container_name',
      'networks',
      'expose',
      'labels',
      'logging',
      'stdin_open',
    ]) {
      assert.ok(w.includes(key), `${key} in ${w}`);
    }
    for (const key of ['tty', 'init', 'stop_grace_period', 'hostname', 'ulimits', 'x-note', 'network_mode']) {
      assert.ok(w.includes(key), `${key} in ${w}`);
    }
    assert.ok(!w.includes('privileged'));
  });

  it('refuses unknown service keys', () => {
    refuses(one('    imagee: nginx\n'), "service 'web': unknown key 'imagee'");
  });

  it('drops top-level networks, version, name and x- keys with a warning', () => {
    const { warnings } = parses(
      'version: "3.9"\nname: demo\nx-common: &c {image: redis}\nservices:\n  a: *c\nnetworks:\n  front: {}\n',
    );
    assert.ok(
      warnings.includes(
        'dropped top-level version, name, x-common, networks (the sidecar manages these itself)',
      ),
    );
  });
});
