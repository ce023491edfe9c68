// Harbor tasks of the shared corpus, end to end on real Docker. The corpus holds their task.toml,
// instruction and compose files only, so each task folder is copied and completed with stubs:
// Dockerfiles FROM the local busybox image (no registry here), tests/test.sh and solution/solve.sh.
// The folder becomes a deployment (cli/harbor.ts), ships as the context, and is graded: the
// reference solution gets 1, a wrong answer 0, and an agent that plants /logs/verifier/reward.txt
// or rewrites /tests in its own environment still gets 0.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import {
  agentDockerfile,
  completeTask,
  deployTask,
  run,
  SIMPLE_TASK,
  type Stub,
  startHarbor,
  stopHarbor,
  verify,
} from './harbor-support.ts';
import { exec, finished, type Real } from './real.ts';

const MAIN_DOCKERFILE = agentDockerfile();

/**
 * A side service standing in for the task's own (an API, an MCP server, a simulated user): busybox
 * httpd serving `files` on `port`, with python and python3 shimmed for the task's healthcheck.
 */
function sideService(port: number, files: Record<string, string>): string {
  const shim = `#!/bin/sh\\nexec wget -q -O /dev/null http://127.0.0.1:${port}/\\n`;
  const writes = Object.entries(files)
    .map(([name, text]) => `echo '${text}' > /www/${name}`)
    .join(' && ');
  return (
    `FROM ${BUSYBOX_IMAGE}\nRUN mkdir /www && ${writes} && echo ok > /www/index.html && ` +
    `printf '${shim}' > /usr/bin/python3 && chmod +x /usr/bin/python3 && cp /usr/bin/python3 /usr/bin/python\n` +
    `CMD ["httpd", "-f", "-p", "${port}", "-h", "/www"]\n`
  );
}

/** tests/test.sh: reward 1 when `check` (a shell condition) holds. */
const testSh = (check: string) => `if ${check}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n`;

const STUBS: Stub[] = [
  SIMPLE_TASK,
  {
    task: 'harbor-cookbook__multi-container',
    files: {
      'environment/Dockerfile': MAIN_DOCKERFILE,
      'environment/api-server/Dockerfile': sideService(5000, { items: '[{"name": "harbor"}]' }),
      'tests/test.sh': testSh(
        'want=$(wget -q -O - http://api-server:5000/items) && [ -n "$want" ] && [ "$want" = "$(cat /app/items.json)" ]',
      ),
      'solution/solve.sh': 'wget -q -O /app/items.json http://api-server:5000/items\n',
    },
    solve: 'wget -q -O /app/items.json http://api-server:5000/items',
    wrong: 'echo "[]" > /app/items.json',
  },
  {
    task: 'harbor-cookbook__mcp-tools',
    files: {
      'environment/Dockerfile': MAIN_DOCKERFILE,
      'environment/mcp-server/Dockerfile': sideService(8000, {
        secret: 's3cret-42',
        timestamp: '1700000000',
      }),
      'tests/test.sh': testSh(
        '[ "$(cat /app/secret.txt)" = "$(wget -q -O - http://mcp-server:8000/secret)" ] && ' +
          '[ "$(cat /app/timestamp.txt)" = "$(wget -q -O - http://mcp-server:8000/timestamp)" ]',
      ),
      'solution/solve.sh':
        'wget -q -O /app/secret.txt http://mcp-server:8000/secret; wget -q -O /app/timestamp.txt http://mcp-server:8000/timestamp\n',
    },
    solve:
      'wget -q -O /app/secret.txt http://mcp-server:8000/secret && wget -q -O /app/timestamp.txt http://mcp-server:8000/timestamp',
    wrong: 'echo guess > /app/secret.txt && echo 0 > /app/timestamp.txt',
  },
  {
    task: 'harbor-cookbook__simulated-user',
    files: {
      'environment/Dockerfile': MAIN_DOCKERFILE,
      'environment/user-server/Dockerfile': sideService(8000, { ask_user: 'celsius to fahrenheit' }),
      'tests/test.sh': testSh('grep -q "$(wget -q -O - http://user-server:8000/ask_user)" /app/convert.py'),
      'solution/solve.sh':
        'printf "# %s\\n" "$(wget -q -O - http://user-server:8000/ask_user)" > /app/convert.py\n',
    },
    solve: 'printf "# %s\\n" "$(wget -q -O - http://user-server:8000/ask_user)" > /app/convert.py',
    wrong: 'echo "print(1)" > /app/convert.py',
  },
];

describe('Harbor tasks on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  const dirs: string[] = [];
  before(async () => {
    await ensureTestImages();
    r = await startHarbor('harbor');
  });
  after(() => stopHarbor(r, dirs));

  for (const stub of STUBS) {
    test(`${stub.task}: deploys; solution 1, wrong 0, planted reward 0, rewritten /tests 0`, async () => {
      const dir = completeTask(stub.task, stub.files);
      dirs.push(dir);
      const { env, context } = await deployTask(r, 'harbor', stub.task.split('__')[1], dir);

      const hidden = await exec(r.t, env, 'main', ['sh', '-c', 'ls /tests; id -u']);
      assert.equal(hidden.stdout, '1000\n', 'the agent sees no tests and is not root');

      await run(r, env, stub.wrong);
      assert.equal((await verify(r, env)).reward, 0, 'a wrong answer');

      await run(r, env, 'echo 1 > /logs/verifier/reward.txt');
      assert.equal((await verify(r, env)).reward, 0, 'a reward planted by the agent');

      await run(r, env, 'printf "echo 1 > /logs/verifier/reward.txt\\n" > /tests/test.sh');
      assert.equal((await verify(r, env)).reward, 0, 'tests rewritten in the agent environment');

      await run(r, env, stub.solve);
      // A daemon the agent leaves behind shows up in the grading record.
      await run(r, env, 'sleep 31337 >/dev/null 2>&1 &');
      const graded = await verify(r, env);
      assert.equal(graded.reward, 1, 'the reference solution');
      assert.equal(graded.source, 'reward.txt');
      assert.equal(graded.context, context);
      assert.match(graded.snapshot, /^ver_/);
      assert.match(graded.verifier_image, /^sha256:[0-9a-f]{64}$/);
      assert.match(graded.tests, /^sha256:[0-9a-f]{64}$/);
      assert.ok(
        graded.processes.some((p: string) => p.endsWith(' sleep 31337')),
        graded.processes.join('\n'),
      );

      // Re-grading the recorded capture: a fork of exactly that snapshot, graded by the same tests.
      const f = await r.t.req('POST', `/v1/envs/${env}/fork`, { body: { version: graded.capture } });
      assert.equal(f.status, 202, JSON.stringify(f.body));
      const forked = await finished(r.t, f.body.deployment.ID);
      assert.equal(forked.deployment.Status, 'succeeded', forked.deployment.Error);
      const again = await verify(r, forked.deployment.EnvID);
      assert.deepEqual(
        [again.reward, again.tests, again.verifier_image, again.context],
        [1, graded.tests, graded.verifier_image, graded.context],
      );
    });
  }
});
