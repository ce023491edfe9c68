// Control plane configuration: flags (one or two dashes), SVC_* fallbacks, the SVC_DB_HOST DSN
// with its password redacted everywhere, and clear errors for bad values.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { createDatabase } from '../../test/support/postgres.ts';
import { tier } from '../../test/support/tiers.ts';
import { ConfigError, parseConfig, redactDsn } from './config.ts';

const parse = (argv: string[], env: Record<string, string> = {}) => parseConfig(argv, env);

test('defaults follow the spec table', () => {
  const c = parse([]);
  assert.equal(c.host, '0.0.0.0');
  assert.equal(c.port, 8080);
  assert.equal(c.db, 'svc.db');
  assert.equal(c.dbRedacted, 'svc.db');
  assert.equal(c.publicUrl, 'http://localhost:8080');
  assert.equal(c.sidecarUrl, 'http://localhost:8080/svcd');
  assert.equal(c.verbose, false);
  assert.equal(c.team, 'default');
  assert.equal(c.bootstrapKey, '');
  assert.equal(c.consoleUrl, '');
  assert.equal(c.devLogin, false);
  assert.equal(c.releasesDir, 'bin');
  assert.equal(c.codehost.apiUrl, 'https://api.github.com');
  assert.equal(c.uploadsGraceMs, 86_400_000);
  assert.equal(c.uploadsSweepMs, 3_600_000);
  const set = parse([], { SVC_UPLOADS_GRACE: '600', SVC_UPLOADS_SWEEP_EVERY: '0' });
  assert.deepEqual([set.uploadsGraceMs, set.uploadsSweepMs], [600_000, 0]);
  assert.equal(c.metricsToken, '');
  assert.equal(c.deployLeaseMs, 30_000);
  assert.equal(parse([], { SVC_DEPLOY_LEASE: '5' }).deployLeaseMs, 5_000);
  assert.deepEqual(
    [c.uploads.quotaBytes, c.uploads.quotaCount, c.uploads.checkMs],
    [4096 * 1024 * 1024, 1000, 120_000],
  );
  const up = parse([], {
    SVC_UPLOADS_QUOTA: '64',
    SVC_UPLOADS_QUOTA_COUNT: '0',
    SVC_UPLOADS_CHECK_TIMEOUT: '30',
    SVC_METRICS_TOKEN: 'operator-token-0123456789',
  });
  assert.deepEqual(
    [up.uploads.quotaBytes, up.uploads.quotaCount, up.uploads.checkMs],
    [64 * 1024 * 1024, 0, 30_000],
  );
  assert.equal(up.metricsToken, 'operator-token-0123456789');
});

test('flags work with one dash, two dashes, and =', () => {
  for (const argv of [
    ['-addr', '127.0.0.1:9000', '-db', 'x.db', '-public-url', 'https://svc.example.com/', '-v'],
    ['--addr', '127.0.0.1:9000', '--db', 'x.db', '--public-url', 'https://svc.example.com/', '--v'],
    ['-addr=127.0.0.1:9000', '-db=x.db', '-public-url=https://svc.example.com/', '-v'],
    ['--addr=127.0.0.1:9000', '--db=x.db', '--public-url=https://svc.example.com', '-v'],
  ]) {
    const c = parse(argv);
    assert.equal(c.host, '127.0.0.1', argv.join(' '));
    assert.equal(c.port, 9000);
    assert.equal(c.db, 'x.db');
    assert.equal(c.publicUrl, 'https://svc.example.com');
    assert.equal(c.sidecarUrl, 'https://svc.example.com/svcd');
    assert.equal(c.verbose, true);
  }
  assert.equal(
    parse(['-sidecar-url', 'https://cdn.example.com/svcd']).sidecarUrl,
    'https://cdn.example.com/svcd',
  );
  assert.deepEqual([parse(['-addr', ':7000']).host, parse(['-addr', '[::1]:7000']).host], ['0.0.0.0', '::1']);
});

test('every flag falls back to its SVC_* variable, and a flag beats its variable', () => {
  const env = {
    SVC_ADDR: '127.0.0.1:7001',
    SVC_DB: 'env.db',
    SVC_PUBLIC_URL: 'https://env.example.com/',
    SVC_SIDECAR_URL: 'https://dl.example.com/svcd',
    SVC_TEAM: 'research',
    SVC_CONSOLE_URL: 'https://console.example.com/',
    SVC_DEV_LOGIN: '1',
    SVC_RELEASES_DIR: '/opt/releases',
    SVC_CODEHOST_CLIENT_ID: 'cid',
    SVC_CODEHOST_CLIENT_SECRET: 'csecret',
    SVC_CODEHOST_APP_ID: '7',
    SVC_CODEHOST_APP_PRIVATE_KEY: '/etc/app.pem',
    SVC_CODEHOST_WEBHOOK_SECRET: 'whs',
    SVC_CODEHOST_API_URL: 'http://127.0.0.1:9999/',
  };
  const c = parse([], env);
  assert.equal(c.port, 7001);
  assert.equal(c.db, 'env.db');
  assert.equal(c.publicUrl, 'https://env.example.com');
  assert.equal(c.sidecarUrl, 'https://dl.example.com/svcd');
  assert.equal(c.team, 'research');
  assert.equal(c.consoleUrl, 'https://console.example.com');
  assert.equal(c.devLogin, true);
  assert.equal(c.releasesDir, '/opt/releases');
  assert.deepEqual(c.codehost, {
    clientId: 'cid',
    clientSecret: 'csecret',
    appId: '7',
    appPrivateKey: '/etc/app.pem',
    webhookSecret: 'whs',
    apiUrl: 'http://127.0.0.1:9999',
  });
  const flagged = parse(['-addr', ':7002', '-db', 'flag.db', '-public-url', 'http://flag:1'], env);
  assert.equal(flagged.port, 7002);
  assert.equal(flagged.db, 'flag.db');
  assert.equal(flagged.publicUrl, 'http://flag:1');
  assert.equal(parse([], { SVC_PUBLIC_URL: 'http://pub:2' }).sidecarUrl, 'http://pub:2/svcd');
});

test('--dev listens on loopback unless told otherwise; a bare server keeps every interface', () => {
  assert.deepEqual([parse([]).host, parse([]).port], ['0.0.0.0', 8080]);
  const dev = parse(['--dev']);
  assert.deepEqual([dev.host, dev.port], ['127.0.0.1', 8080]);
  assert.equal(parse(['--dev', '-addr', ':9001']).host, '0.0.0.0', '-addr wins');
  assert.equal(parse(['--dev'], { SVC_ADDR: '0.0.0.0:9002' }).host, '0.0.0.0', 'SVC_ADDR wins');
});

test('--dev: the public URL defaults to where the server listens; the sidecar URL follows it', () => {
  const cases: [string[], string][] = [
    [['--dev'], 'http://127.0.0.1:8080'],
    [['--dev', '-addr', '127.0.0.1:9003'], 'http://127.0.0.1:9003'],
    [['--dev', '-addr', 'localhost:9004'], 'http://localhost:9004'],
    [['--dev', '-addr', '[::1]:9005'], 'http://[::1]:9005'],
    // A wildcard address is not a place to connect to: this machine reaches it on loopback.
    [['--dev', '-addr', ':9006'], 'http://127.0.0.1:9006'],
    [['--dev', '-addr', '0.0.0.0:9007'], 'http://127.0.0.1:9007'],
    [['--dev', '-addr', '[::]:9008'], 'http://127.0.0.1:9008'],
  ];
  for (const [argv, want] of cases) {
    const c = parse(argv);
    assert.equal(c.publicUrl, want, argv.join(' '));
    assert.equal(c.sidecarUrl, `${want}/svcd`, argv.join(' '));
  }
  assert.equal(parse(['--dev', '-public-url', 'https://x.example.com']).publicUrl, 'https://x.example.com');
  assert.equal(parse(['--dev'], { SVC_PUBLIC_URL: 'http://pub:3' }).publicUrl, 'http://pub:3');
  // Outside --dev the spec's default stands, whatever the listen address.
  assert.equal(parse(['-addr', '127.0.0.1:9009']).publicUrl, 'http://localhost:8080');
});

test('SVC_DB_HOST assembles a Postgres DSN; the password is encoded and redacted', () => {
  const c = parse([], { SVC_DB_HOST: 'db.internal', SVC_DB_PASSWORD: 'p@ss/w:rd' });
  assert.equal(c.db, 'postgres://svc:p%40ss%2Fw%3Ard@db.internal:5432/svc?sslmode=require');
  assert.equal(c.dbRedacted, 'postgres://svc:***@db.internal:5432/svc?sslmode=require');
  const all = parse([], {
    SVC_DB_HOST: '::1',
    SVC_DB_PORT: '6543',
    SVC_DB_NAME: 'control',
    SVC_DB_USER: 'admin',
    SVC_DB_SSLMODE: 'disable',
  });
  assert.equal(all.db, 'postgres://admin@[::1]:6543/control?sslmode=disable');
  assert.equal(all.dbRedacted, all.db, 'nothing to redact');
  // SVC_DB (or -db) wins over SVC_DB_HOST.
  assert.equal(parse([], { SVC_DB: 'a.db', SVC_DB_HOST: 'h' }).db, 'a.db');
  assert.equal(parse(['-db', 'b.db'], { SVC_DB_HOST: 'h' }).db, 'b.db');
});

test('redactDsn hides the password wherever a DSN puts it', () => {
  const cases: [string, string][] = [
    ['postgres://u:secret@h/db', 'postgres://u:***@h/db'],
    ['postgresql://u:secret@h:5432/db?sslmode=require', 'postgresql://u:***@h:5432/db?sslmode=require'],
    ['postgres://u:se@cret@h/db', 'postgres://u:***@h/db'],
    ['postgres://h/db?user=u&password=secret', 'postgres://h/db?user=u&password=***'],
    ['postgres://u@h/db', 'postgres://u@h/db'],
    ['svc.db', 'svc.db'],
  ];
  for (const [dsn, want] of cases) {
    assert.equal(redactDsn(dsn), want);
    assert.ok(!redactDsn(dsn).includes('secret'));
    assert.ok(!redactDsn(dsn).includes('cret'));
  }
  assert.ok(!redactDsn('postgres://u:secret@[bad/db').includes('secret'));
});

test('bad values are clear errors', () => {
  const cases: [string[], Record<string, string>, RegExp][] = [
    [['-addr', 'localhost'], {}, /-addr: 'localhost' is not host:port or :port/],
    [['-addr', ':99999'], {}, /port 99999 is out of range/],
    [[], { SVC_ADDR: 'nope' }, /-addr: 'nope'/],
    [['-public-url', 'ftp://x'], {}, /-public-url: must be http:\/\/ or https:\/\//],
    [['-public-url', 'not a url'], {}, /-public-url: 'not a url' is not a URL/],
    [['-sidecar-url', '::'], {}, /-sidecar-url/],
    [['-db', ''], {}, /-db: empty/],
    [['--nope'], {}, /Unknown option '--nope'[\s\S]*usage: svc-server/],
    [['extra'], {}, /positional|Unexpected argument/i],
    [['-h'], {}, /usage: svc-server/],
    [[], { SVC_CONSOLE_URL: 'console' }, /SVC_CONSOLE_URL: 'console' is not a URL/],
    [[], { SVC_CODEHOST_API_URL: 'x' }, /SVC_CODEHOST_API_URL/],
    [[], { SVC_BOOTSTRAP_KEY: 'short' }, /SVC_BOOTSTRAP_KEY: must be dak_/],
    [[], { SVC_DEV_LOGIN: 'yes' }, /SVC_DEV_LOGIN: 'yes' must be 1 or 0/],
    [[], { SVC_DB_HOST: 'h', SVC_DB_PORT: 'abc' }, /SVC_DB_PORT: 'abc' is not a port/],
    [[], { SVC_UPLOADS_GRACE: '1h' }, /SVC_UPLOADS_GRACE: '1h' is not a whole number of seconds/],
    [[], { SVC_UPLOADS_SWEEP_EVERY: '-5' }, /SVC_UPLOADS_SWEEP_EVERY: '-5' is not a whole number/],
    [[], { SVC_UPLOADS_QUOTA: '4G' }, /SVC_UPLOADS_QUOTA: '4G' is not a whole number of MiB/],
    [[], { SVC_UPLOADS_CHECK_TIMEOUT: '0' }, /SVC_UPLOADS_CHECK_TIMEOUT: must be at least 1 second/],
    [[], { SVC_METRICS_TOKEN: 'short' }, /SVC_METRICS_TOKEN: must be 16 to 512 printable/],
    [[], { SVC_DEPLOY_LEASE: '0' }, /SVC_DEPLOY_LEASE: a lease of 0 seconds/],
    [[], { SVC_DEPLOY_LEASE: '30s' }, /SVC_DEPLOY_LEASE: '30s' is not a whole number of seconds/],
  ];
  for (const [argv, env, want] of cases) {
    assert.throws(
      () => parse(argv, env),
      (err: unknown) => err instanceof ConfigError && want.test(err.message),
      `${argv.join(' ')} ${JSON.stringify(env)}`,
    );
  }
});

/** Runs the real program to its first exit, or until `stopWhen` matches its output (then SIGTERM). */
function runServer(
  argv: string[],
  env: Record<string, string>,
  stopWhen?: RegExp,
): Promise<{ code: number | null; out: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  const proc = spawn(
    process.execPath,
    [new URL('../../programs/svc-server.ts', import.meta.url).pathname, ...argv],
    {
      env: { ...clean, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let signalled = false;
  const take = (c: Buffer) => {
    out += c;
    if (!signalled && stopWhen?.test(out)) {
      signalled = true;
      proc.kill('SIGTERM');
    }
  };
  proc.stdout.on('data', take);
  proc.stderr.on('data', take);
  return new Promise((resolve) => proc.on('exit', (code) => resolve({ code, out })));
}

describe('the program', () => {
  test('a bad value stops the start with exit 2 and the reason', async () => {
    const r = await runServer(['-addr', 'nowhere'], {});
    assert.equal(r.code, 2);
    assert.match(r.out, /^svc-server: -addr: 'nowhere' is not host:port or :port\n$/);
  });

  test('an unreachable SVC_DB_HOST fails with exit 1 without showing the password', async () => {
    const srv = createServer().listen(0, '127.0.0.1');
    await new Promise((r) => srv.once('listening', r));
    const { port } = srv.address() as { port: number };
    srv.close();
    const r = await runServer(['-addr', '127.0.0.1:0'], {
      SVC_DB_HOST: '127.0.0.1',
      SVC_DB_PORT: String(port),
      SVC_DB_PASSWORD: 'Sup3r-Secret',
      SVC_DB_SSLMODE: 'disable',
    });
    assert.equal(r.code, 1);
    assert.match(r.out, /svc-server: /);
    assert.ok(!r.out.includes('Sup3r-Secret'), r.out);
  });

  test('with SVC_DB_HOST every log line shows the DSN redacted', { skip: tier('postgres') }, async () => {
    const name = `cfg_${process.pid}`;
    const pg = new URL(await createDatabase(process.env.SVC_TEST_PG as string, name));
    const r = await runServer(
      ['-addr', '127.0.0.1:0', '-v'],
      {
        SVC_DB_HOST: pg.hostname,
        SVC_DB_PORT: pg.port,
        SVC_DB_NAME: name,
        SVC_DB_USER: 'svc',
        // The throwaway cluster trusts local connections, so any password is accepted.
        SVC_DB_PASSWORD: 'Sup3r-Secret',
        SVC_DB_SSLMODE: 'disable',
      },
      /svc-server listening/,
    );
    assert.equal(r.code, 0, r.out);
    assert.ok(r.out.includes(`postgres://svc:***@127.0.0.1:${pg.port}/${name}?sslmode=disable`), r.out);
    for (const line of r.out.split('\n')) assert.ok(!line.includes('Sup3r-Secret'), line);
  });
});

test('a replica: its own URL for transfers and its drain after SIGTERM', () => {
  const c = parseConfig(['-db', 'x.db'], {
    SVC_REPLICA_URL: 'http://10.0.0.5:8080/',
    SVC_DRAIN_SECONDS: '3',
  });
  assert.equal(c.replicaUrl, 'http://10.0.0.5:8080');
  assert.equal(c.drainMs, 3000);
  const one = parseConfig(['-db', 'x.db'], {});
  assert.equal(one.replicaUrl, '');
  assert.equal(one.drainMs, 0);
  assert.throws(() => parseConfig(['-db', 'x.db'], { SVC_REPLICA_URL: 'ftp://x' }), /SVC_REPLICA_URL/);
  assert.throws(() => parseConfig(['-db', 'x.db'], { SVC_DRAIN_SECONDS: '-1' }), /SVC_DRAIN_SECONDS/);
});

test('a replica: where its peers reach it, and its lease', () => {
  const c = parseConfig(['-db', 'x.db'], {
    SVC_REPLICA_URL: 'http://ha.example:8081',
    SVC_REPLICA_PEER_URL: 'http://r1:8080/',
    SVC_REPLICA_LEASE: '20',
  });
  assert.equal(c.replicaUrl, 'http://ha.example:8081');
  assert.equal(c.replicaPeerUrl, 'http://r1:8080');
  assert.equal(c.replicaLeaseMs, 20_000);
  const one = parseConfig(['-db', 'x.db'], {});
  assert.equal(one.replicaPeerUrl, '');
  assert.equal(one.replicaLeaseMs, 10_000);
  assert.throws(
    () => parseConfig(['-db', 'x.db'], { SVC_REPLICA_PEER_URL: 'r1:8080' }),
    /SVC_REPLICA_PEER_URL/,
  );
  assert.throws(
    () => parseConfig(['-db', 'x.db'], { SVC_REPLICA_LEASE: '1' }),
    /SVC_REPLICA_LEASE: must be at least 2/,
  );
  assert.throws(() => parseConfig(['-db', 'x.db'], { SVC_REPLICA_LEASE: 'ten' }), /SVC_REPLICA_LEASE/);
});

test('SVC_DB_POOL: the connections to Postgres, 1 to 500', () => {
  assert.equal(parseConfig(['-db', 'x.db'], {}).dbPoolSize, 10);
  assert.equal(parseConfig(['-db', 'x.db'], { SVC_DB_POOL: '40' }).dbPoolSize, 40);
  for (const bad of ['0', '501', 'many'])
    assert.throws(() => parseConfig(['-db', 'x.db'], { SVC_DB_POOL: bad }), /SVC_DB_POOL/);
});
