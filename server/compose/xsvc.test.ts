// biome-ignore-all lint/suspicious/noTemplateCurlyInString: compose interpolation text is what these tests feed in
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parses, refuses } from './testing.ts';

const stack = (ext: string, user = "'1000:1000'") => `services:
  main:
    image: ghcr.io/org/agent:1
    user: ${user}
    volumes: [work:/work]
  grader:
    image: ghcr.io/org/grader:1
volumes:
  work:
${ext}`;

const ROOT_MESSAGE =
  "compose: x-svc.agent.service 'main' must set a non-root user (user: '<uid>:<gid>'); the agent is never root";

describe('compose x-svc extensions', () => {
  it('defaults to egress deny with no agent and no verifier', () => {
    const { spec } = parses(stack(''));
    assert.equal(spec.egress, 'deny');
    assert.equal(spec.agent, null);
    assert.equal(spec.verifier, null);
  });

  it('reads the dotted spelling exactly as the spec prints it', () => {
    const { spec, warnings } = parses(
      stack(`x-svc.agent.service: main
x-svc.verifier:
  image: ghcr.io/org/grader:1
  command: [python, /grade.py]
  collect: [/work/answer.txt, /work/out/]
  timeout_sec: 120
x-svc.egress: allow
`),
    );
    assert.deepEqual(spec.agent, { service: 'main' });
    assert.equal(spec.egress, 'allow');
    assert.deepEqual(spec.verifier, {
      image: 'ghcr.io/org/grader:1',
      command: ['python', '/grade.py'],
      collect: ['/work/answer.txt', '/work/out'],
      timeout_sec: 120,
    });
    assert.ok(!warnings.some((w) => w.includes('x-svc')), warnings.join('\n'));
  });

  it('reads the nested and mixed spellings to the same result', () => {
    const nested = parses(
      stack(`x-svc:
  agent: {service: main}
  verifier: {service: grader, command: "sh /grade.sh"}
  egress: deny
`),
    ).spec;
    const mixed = parses(
      stack(`x-svc.agent: {service: main}
x-svc.verifier.service: grader
x-svc.verifier.command: sh /grade.sh
`),
    ).spec;
    assert.deepEqual(nested, mixed);
    assert.deepEqual(nested.verifier, {
      service: 'grader',
      command: 'sh /grade.sh',
      collect: [],
      timeout_sec: 600,
    });
  });

  it('interpolates x-svc values', () => {
    const { spec } = parses(stack('x-svc.agent.service: ${AGENT}\nx-svc.egress: ${EGRESS:-deny}\n'), {
      AGENT: 'main',
    });
    assert.deepEqual(spec.agent, { service: 'main' });
    assert.equal(spec.egress, 'deny');
  });

  it('refuses a root agent with the exact message', () => {
    // Docker reads the uid with Go's Atoi: a sign and any number of zeros is uid 0 too.
    for (const user of [
      "''",
      '0',
      'root',
      "'0:0'",
      "'root:root'",
      "'0:1000'",
      "'00'",
      "'-0'",
      "'-000:1000'",
    ]) {
      const message = refuses(stack('x-svc.agent.service: main\n', user));
      assert.equal(message, ROOT_MESSAGE, `user ${user}`);
    }
    const noUser = stack('x-svc.agent.service: main\n').replace("    user: '1000:1000'\n", '');
    assert.equal(refuses(noUser), ROOT_MESSAGE);
    for (const user of ["'1000:1000'", '1000', 'agent', "'unit:root'"]) {
      assert.deepEqual(parses(stack('x-svc.agent.service: main\n', user)).spec.agent, { service: 'main' });
    }
  });

  it('takes x-svc.runtime (runc or gvisor) into the spec, absent when unset, and refuses others', () => {
    assert.equal(parses(stack('')).spec.runtime, undefined);
    assert.equal(parses(stack('x-svc.runtime: gvisor\n')).spec.runtime, 'gvisor');
    assert.equal(parses(stack('x-svc:\n  runtime: runc\n')).spec.runtime, 'runc');
    for (const bad of ['kata', 'runsc', '1', '[gvisor]']) {
      assert.match(refuses(stack(`x-svc.runtime: ${bad}\n`)), /x-svc\.runtime must be runc or gvisor/);
    }
  });

  it('takes x-svc.disk_mb (default 10 GiB) into the spec and refuses nonsense', () => {
    assert.equal(parses(stack('')).spec.disk_mb, 10_240);
    assert.equal(parses(stack('x-svc.disk_mb: 512\n')).spec.disk_mb, 512);
    assert.equal(parses(stack('x-svc:\n  disk_mb: 2048\n')).spec.disk_mb, 2048);
    for (const bad of ['0', '-5', 'lots', '1.5'])
      assert.match(refuses(stack(`x-svc.disk_mb: ${bad}\n`)), /x-svc\.disk_mb/);
  });

  it('keeps storage_opt.size as the service layer_mb and drops other storage_opt keys with a warning', () => {
    const { spec, warnings } = parses(
      'services:\n  a:\n    image: busybox\n    storage_opt: {size: 2G, dm.basesize: 1G}\n  b:\n    image: busybox\n',
    );
    assert.equal(spec.services[0].layer_mb, 2048);
    assert.equal(spec.services[1].layer_mb, undefined);
    assert.ok(
      warnings.some((w) => w.includes('storage_opt: dropped dm.basesize')),
      warnings.join('\n'),
    );
    assert.match(
      refuses('services:\n  a:\n    image: busybox\n    storage_opt: {size: lots}\n'),
      /storage_opt\.size/,
    );
  });

  it('lets a root service run when no agent is declared', () => {
    assert.equal(parses(stack('', 'root')).spec.services[0].user, 'root');
  });

  it('refuses an agent or verifier service that does not exist or is left out', () => {
    refuses(stack('x-svc.agent.service: nobody\n'), 'x-svc.agent.service', "service 'nobody' does not exist");
    refuses(
      stack('x-svc.agent.service: main\nx-svc.verifier: {service: ghost, command: x}\n'),
      'x-svc.verifier.service',
      "'ghost' does not exist",
    );
    const profiled = `services:\n  main: {image: x, user: '1:1'}\n  agent: {image: x, user: '1:1', profiles: [a]}\nx-svc.agent.service: agent\n`;
    refuses(profiled, 'x-svc.agent.service', 'left out by its profiles');
    refuses(stack('x-svc.agent: {}\n'), 'x-svc.agent needs service');
    refuses(stack('x-svc.agent: main\n'), 'x-svc.agent must be a mapping', 'x-svc.agent.service: main');
  });

  it('refuses malformed verifiers', () => {
    const v = (body: string) => stack(`x-svc.agent.service: main\nx-svc.verifier:\n${body}`);
    refuses(v('  command: x\n'), 'x-svc.verifier needs exactly one of image');
    refuses(v('  image: g:1\n  service: grader\n  command: x\n'), 'exactly one of image');
    refuses(v('  image: g:1\n'), 'x-svc.verifier.command is required');
    refuses(v('  image: g:1\n  command: []\n'), 'x-svc.verifier.command is required');
    refuses(v('  image: "Bad Image"\n  command: x\n'), 'x-svc.verifier.image', 'not an image reference');
    refuses(
      v('  image: g:1\n  command: x\n  collect: [relative/path]\n'),
      'x-svc.verifier.collect[0]',
      'absolute',
    );
    refuses(
      v('  image: g:1\n  command: x\n  collect: [/work/../etc]\n'),
      'x-svc.verifier.collect[0]',
      "'..'",
    );
    refuses(v('  image: g:1\n  command: x\n  collect: /work\n'), 'x-svc.verifier.collect must be a list');
    refuses(v('  image: g:1\n  command: x\n  timeout_sec: 0\n'), 'x-svc.verifier.timeout_sec');
    refuses(v('  image: g:1\n  command: x\n  timeout_sec: 1.5\n'), 'x-svc.verifier.timeout_sec');
    refuses(v('  image: g:1\n  command: x\n  bogus: 1\n'), "unknown key 'x-svc.verifier.bogus'");
    refuses(
      stack('x-svc.verifier: {image: "g:1", command: x}\n'),
      'x-svc.verifier needs x-svc.agent.service',
    );
  });

  it('refuses bad egress, unknown x-svc keys and keys given twice', () => {
    refuses(stack('x-svc.egress: open\n'), 'x-svc.egress must be deny or allow');
    refuses(stack('x-svc.egress: true\n'), 'x-svc.egress must be deny or allow');
    refuses(stack('x-svc.egres: allow\n'), "unknown key 'x-svc.egres'");
    refuses(stack('x-svc-egress: allow\n'), "unknown key 'x-svc-egress'");
    refuses(
      stack('x-svc:\n  agent: {service: main}\nx-svc.agent.service: main\n'),
      'x-svc.agent.service is given twice',
    );
    refuses(stack('x-svc: [a]\n'), 'x-svc must be a mapping');
  });
});
