import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { memoryMb } from './resources.ts';
import { parses, refuses, service } from './testing.ts';

const hc = (body: string) => `services:\n  db:\n    image: postgres\n    healthcheck:\n${body}`;

describe('compose healthcheck', () => {
  it('keeps CMD and CMD-SHELL lists with their timings', () => {
    const a = service(
      hc('      test: ["CMD", "pg_isready"]\n      interval: 10s\n      timeout: 5s\n      retries: 5\n'),
    );
    assert.deepEqual(a.health, { test: ['CMD', 'pg_isready'], interval: '10s', retries: 5, timeout: '5s' });
    const b = service(
      hc(
        '      test: ["CMD-SHELL", "curl -f localhost || exit 1"]\n      interval: 1m30s\n      start_period: 500ms\n',
      ),
    );
    assert.deepEqual(b.health, {
      test: ['CMD-SHELL', 'curl -f localhost || exit 1'],
      interval: '1m30s',
      retries: 0,
      start_period: '500ms',
    });
  });

  it('turns a plain string into CMD-SHELL and keeps $ after $$ unescaping', () => {
    const a = service(
      hc('      test: pg_isready -d $$POSTGRES_DB\n      interval: "5s"\n      retries: "3"\n'),
    );
    assert.deepEqual(a.health, {
      test: ['CMD-SHELL', 'pg_isready -d $POSTGRES_DB'],
      interval: '5s',
      retries: 3,
    });
  });

  it('maps disable: true and NONE to NONE', () => {
    assert.deepEqual(service(hc('      disable: true\n      test: [CMD, x]\n')).health, {
      test: ['NONE'],
      interval: '',
      retries: 0,
    });
    assert.deepEqual(service(hc('      test: [NONE]\n')).health?.test, ['NONE']);
  });

  it('drops a healthcheck without test: and start_interval, with warnings', () => {
    const a = parses(hc('      interval: 10s\n'));
    assert.equal(a.spec.services[0].health, null);
    assert.ok(a.warnings.some((w) => w.includes("service 'db': healthcheck: no test:")));
    const b = parses(hc('      test: [CMD, x]\n      start_interval: 5s\n'));
    assert.ok(b.warnings.some((w) => w.includes('dropped start_interval')));
  });

  it('refuses bad tests, durations and retries naming the service', () => {
    refuses(hc('      test: [CURL, x]\n'), "service 'db': healthcheck.test", 'CMD, CMD-SHELL or NONE');
    refuses(hc('      test: [CMD]\n'), "service 'db': healthcheck.test", 'CMD needs a command');
    refuses(hc('      test: [CMD-SHELL, a, b]\n'), 'exactly one shell command');
    refuses(hc('      test: ""\n'), 'empty');
    refuses(hc('      test: []\n'), "service 'db': healthcheck.test must be");
    refuses(
      hc('      test: [CMD, x]\n      interval: 10\n'),
      "service 'db': healthcheck.interval",
      'not a duration',
    );
    refuses(hc('      test: [CMD, x]\n      timeout: 5 seconds\n'), 'healthcheck.timeout', 'not a duration');
    refuses(hc('      test: [CMD, x]\n      start_period: ""\n'), 'healthcheck.start_period');
    refuses(hc('      test: [CMD, x]\n      retries: -1\n'), "service 'db': healthcheck.retries");
    refuses(hc('      test: [CMD, x]\n      retries: three\n'), 'healthcheck.retries');
    refuses(hc('      test: [CMD, x]\n      bogus: 1\n'), "service 'db': healthcheck: unknown key 'bogus'");
  });
});

const res = (body: string) => `services:\n  app:\n    image: app\n${body}`;

describe('compose resources', () => {
  it('parses memory sizes to MiB, rounding up', () => {
    assert.equal(memoryMb('512m', 'x'), 512);
    assert.equal(memoryMb('1g', 'x'), 1024);
    assert.equal(memoryMb('1.5GiB', 'x'), 1536);
    assert.equal(memoryMb('50M', 'x'), 50);
    assert.equal(memoryMb('8192k', 'x'), 8);
    assert.equal(memoryMb(1073741824, 'x'), 1024);
    assert.equal(memoryMb('10000000', 'x'), 10);
    assert.equal(memoryMb('6m', 'x'), 6);
    assert.equal(memoryMb('0', 'x'), 0);
  });

  it('reads deploy.resources.limits', () => {
    const svc = service(
      res('    deploy:\n      resources:\n        limits: {memory: 512m, cpus: "0.5", pids: 100}\n'),
    );
    assert.deepEqual(svc.resources, { memory_mb: 512, cpus: 0.5, pids: 100 });
  });

  it('reads mem_limit, cpus and pids_limit', () => {
    const svc = service(res('    mem_limit: 4g\n    cpus: 2\n    pids_limit: 512\n'));
    assert.deepEqual(svc.resources, { memory_mb: 4096, cpus: 2, pids: 512 });
    assert.deepEqual(service(res('    cpus: .5\n    pids_limit: -1\n')).resources, {
      memory_mb: 0,
      cpus: 0.5,
      pids: 0,
    });
  });

  it('accepts both spellings when they agree and refuses when they differ', () => {
    const svc = service(res('    mem_limit: 1g\n    deploy: {resources: {limits: {memory: 1024m}}}\n'));
    assert.equal(svc.resources.memory_mb, 1024);
    refuses(
      res('    cpus: 1\n    deploy: {resources: {limits: {cpus: 2}}}\n'),
      "service 'app'",
      'cpus',
      'disagree',
    );
  });

  it('refuses malformed limits naming the service and key', () => {
    refuses(res('    mem_limit: lots\n'), "service 'app': mem_limit", 'not a memory size');
    refuses(res('    mem_limit: 99999t\n'), 'larger than 16 TiB');
    refuses(
      res('    deploy: {resources: {limits: {memory: x}}}\n'),
      "service 'app': deploy.resources.limits.memory",
    );
    refuses(res('    cpus: -1\n'), "service 'app': cpus");
    refuses(res('    cpus: "0.001"\n'), "service 'app': cpus", 'below the 0.01');
    refuses(res('    mem_limit: 100b\n'), "service 'app': mem_limit", 'below the 6m');
    refuses(res('    cpus: many\n'), "service 'app': cpus");
    refuses(res('    pids_limit: 1.5\n'), "service 'app': pids_limit");
    refuses(
      res('    deploy: {resources: {limits: {gpus: 1}}}\n'),
      "service 'app': deploy.resources.limits: unknown key 'gpus'",
    );
    refuses(res('    deploy: {resources: {bogus: {}}}\n'), "unknown key 'bogus'");
    refuses(res('    deploy: {bogus: 1}\n'), "service 'app': deploy: unknown key 'bogus'");
  });

  it('refuses device reservations and drops other deploy keys with a warning', () => {
    refuses(
      res(
        '    deploy:\n      resources:\n        reservations:\n          devices: [{capabilities: [gpu]}]\n',
      ),
      "service 'app': deploy.resources.reservations.devices",
      'GPUs',
    );
    const { spec, warnings } = parses(
      res(
        '    deploy:\n      mode: replicated\n      replicas: 3\n      resources:\n        reservations: {memory: 1g}\n',
      ),
    );
    assert.deepEqual(spec.services[0].resources, { memory_mb: 0, cpus: 0, pids: 0 });
    const w = warnings.find((x) => x.startsWith("service 'app': deploy: dropped"));
    assert.ok(w?.includes('mode') && w.includes('replicas (3;') && w.includes('resources.reservations'), w);
    assert.ok(!parses(res('    deploy: {replicas: 1}\n')).warnings.some((x) => x.includes('replicas')));
  });
});
