// The Terminal-Bench v1 and Harbor multi-step tasks of the shared corpus, end to end on real
// Docker. The corpus holds their task.yaml / task.toml, instructions and compose files only, so
// each folder is completed with stubs: Dockerfiles FROM the local busybox image, and for the
// Terminal-Bench tasks run-tests.sh with a tiny stand-in for pytest (the image has no Python) whose
// output the real parsers grade (sidecar/verify/parsers.ts). Each task: the reference solution gets
// 1, a wrong answer 0, and an agent that plants /logs/verifier/reward.txt or rewrites /tests in its
// own environment still gets 0; the multi-step task is walked step by step with svc step.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { finalLine, removeDir, svc, tempDir } from '../cli/harness.ts';
import { ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import {
  agentDockerfile,
  completeTask,
  deployTask,
  run,
  startHarbor,
  stopHarbor,
  verify,
} from './harbor-support.ts';
import { exec, type Real } from './real.ts';

/** Stands in for `pytest FILE -rA`: runs FILE's shell test_* functions, prints pytest's summary. */
const PYTEST_STUB = `echo "============================= test session starts =============================="
. "$1"
summary=""
for t in $(grep -o '^test_[a-z_]*' "$1"); do
  if ( $t ) >/dev/null 2>&1; then summary="$summary
PASSED test_outputs.py::$t"; else summary="$summary
FAILED test_outputs.py::$t - AssertionError: $t"; fi
done
echo "=========================== short test summary info ============================"
echo "$summary" | sed '/^$/d'
`;

interface TbStub {
  task: string;
  files: Record<string, string>;
  solve: string;
  wrong: string;
  parser: string;
  testDir: string;
}

const ALLERGIES = 'terminal-bench-v1__polyglot_cpp_allergies';
const ASTROPY = 'terminal-bench-v1__astropy__astropy-12907';
const TB: TbStub[] = [
  {
    task: ALLERGIES,
    parser: 'pytest',
    testDir: '/tests',
    files: {
      Dockerfile: `${agentDockerfile()}COPY allergies.h allergies.cpp /app/\n`,
      'allergies.h': '#pragma once\nnamespace allergies { class allergy_test; }\n',
      'allergies.cpp': '#include "allergies.h"\n// TODO\n',
      'run-tests.sh':
        '#!/bin/bash\n# for: pip install pytest && pytest $TEST_DIR/test_outputs.py -rA\nsh $TEST_DIR/pytest $TEST_DIR/test_outputs.sh -rA\n',
      'tests/pytest': PYTEST_STUB,
      'tests/test_outputs.sh':
        'test_sources_exist() { [ -f /app/allergies.cpp ] && [ -f /app/allergies.h ]; }\n' +
        'test_uses_emplace() { grep -q emplace /app/allergies.cpp; }\n' +
        "test_ignores_higher_scores() { grep -q 'score & 255' /app/allergies.cpp; }\n",
      'solution.sh': 'true\n',
    },
    solve:
      'printf \'#include "allergies.h"\\n// items.emplace(...) for each bit of (score & 255)\\n\' > /app/allergies.cpp',
    wrong:
      'printf \'#include "allergies.h"\\n// items.emplace(...) for each bit of score\\n\' > /app/allergies.cpp',
  },
  {
    task: ASTROPY,
    parser: 'swebench',
    testDir: '',
    files: {
      Dockerfile: `${agentDockerfile('/testbed')}COPY separable.py /testbed/astropy/modeling/separable.py\n`,
      'separable.py': 'def _cstack(left, right):\n        cright[-right.shape[0]:, -right.shape[1]:] = 1\n',
      'run-tests.sh':
        "#!/bin/bash\ncd /testbed\nif grep -qF -e '-right.shape[1]:] = right' astropy/modeling/separable.py; then r=PASSED; else r=FAILED; fi\n" +
        'echo "SWEBench results starts here"\necho "$r"\necho "SWEBench results ends here"\n',
    },
    solve: "sed -i 's/= [a-z0-9]*$/= right/' /testbed/astropy/modeling/separable.py",
    wrong: "sed -i 's/= 1$/= left/' /testbed/astropy/modeling/separable.py",
  },
];

describe('Terminal-Bench and multi-step Harbor tasks on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let home: string;
  const dirs: string[] = [];
  before(async () => {
    await ensureTestImages();
    r = await startHarbor('tasks');
    home = tempDir();
  });
  after(async () => {
    await stopHarbor(r, dirs);
    if (home) removeDir(home);
  });
  const cli = (args: string[]) =>
    svc(args, { home, env: { SVC_SERVER: r.t.url, SVC_API_KEY: r.t.key }, timeoutMs: 240_000 });

  for (const stub of TB) {
    test(`${stub.task}: parser ${stub.parser}; solution 1, wrong 0, planted reward 0, rewritten /tests 0`, async () => {
      const dir = completeTask(stub.task, stub.files);
      dirs.push(dir);
      const { env, context } = await deployTask(r, 'tasks', stub.task.split('__').slice(1).join('-'), dir);
      const who = await exec(r.t, env, 'main', [
        'sh',
        '-c',
        'ls /tests; id -u; echo $TEST_DIR; ls -d /logs /agent-logs',
      ]);
      // TEST_DIR is what the task's compose file passes on (astropy's passes nothing).
      assert.equal(
        who.stdout,
        `1000\n${stub.testDir}\n/agent-logs\n/logs\n`,
        'no tests, not root, the harness paths',
      );

      await run(r, env, stub.wrong);
      const wrong = await verify(r, env);
      assert.deepEqual([wrong.reward, wrong.source], [0, stub.parser], wrong.output);

      await run(r, env, 'echo 1 > /logs/verifier/reward.txt');
      assert.equal((await verify(r, env)).reward, 0, 'a reward planted by the agent');

      const fake =
        stub.parser === 'pytest'
          ? 'echo "=== short test summary info ==="; echo "PASSED test_outputs.py::test_all"'
          : 'echo "SWEBench results starts here"; echo PASSED; echo "SWEBench results ends here"';
      await run(r, env, `printf '%s\\n' '${fake}' > /tests/run-tests.sh`);
      assert.equal((await verify(r, env)).reward, 0, 'tests rewritten in the agent environment');

      await run(r, env, stub.solve);
      const graded = await verify(r, env);
      assert.deepEqual([graded.reward, graded.source], [1, stub.parser], graded.output);
      assert.equal(graded.context, context);
      assert.match(graded.tests, /^sha256:[0-9a-f]{64}$/);
      if (stub.parser === 'pytest')
        assert.match(graded.output, /PASSED test_outputs.py::test_ignores_higher_scores/);
    });
  }

  test('harbor-cookbook__multi-step: svc step readies each step, each graded in order with its own reward', async () => {
    const helpers = 'reward() { if "$@"; then echo 1; else echo 0; fi > /logs/verifier/reward.txt; }\n';
    const dir = completeTask('harbor-cookbook__multi-step', {
      'environment/Dockerfile': agentDockerfile(),
      'tests/helpers.sh': helpers,
      // Harbor's fallback for a step without its own test.sh: every step here has one, which wins.
      'tests/test.sh': 'echo 0 > /logs/verifier/reward.txt\n',
      'steps/scaffold/tests/test.sh':
        '. /tests/helpers.sh\nreward [ -x /app/greet.sh ] && [ "$(/app/greet.sh)" = hello ]\n',
      'steps/implement/tests/test.sh':
        '. /tests/helpers.sh\ngreets() { [ "$(/app/greet.sh)" = "$EXPECTED_GREETING" ] && [ "$(cat /tests/expected.txt)" = "$EXPECTED_GREETING" ]; }\nreward greets\n',
      'steps/implement/tests/expected.txt': 'Hello, Harbor!\n',
      'steps/implement/workdir/config.txt': 'Harbor\n',
      'steps/implement/workdir/setup.sh': 'id -u > /app/.setup-ran\nrm -- "$0"\n',
      'steps/document/tests/test.sh':
        ". /tests/helpers.sh\ndocs() { grep -q '^# greet.sh' /app/README.md && grep -q config.txt /app/README.md && grep -q '^```bash' /app/README.md && [ -x /app/greet.sh ]; }\nreward docs\n",
    });
    dirs.push(dir);
    const d = await cli(['deploy', '--harbor', dir, '--project', 'tasks', '--env', 'multi']);
    assert.equal(d.code, 0, `${d.stdout}\n${d.stderr}\n${r.log().slice(-2000)}`);
    const env = (await r.t.req('GET', `/v1/deployments/${finalLine(d).id}`)).body.deployment.EnvID;

    const graded = async (step: string, want: number, why: string) => {
      const v = await verify(r, env, step);
      assert.deepEqual([v.reward, v.step], [want, step], `${why}\n${v.output}`);
      return v;
    };
    const steps = await cli(['step', '--harbor', dir, env, 'scaffold']);
    assert.equal(steps.code, 0, steps.stderr);
    assert.match(steps.stdout, /^Create an executable bash script at `\/app\/greet.sh`/);

    await run(r, env, "printf '#!/bin/sh\\necho hello\\n' > /app/greet.sh");
    const notExecutable = await graded('scaffold', 0, 'a script that does not run');
    assert.equal(notExecutable.early_stop, true, 'below min_reward 1: the remaining steps are skipped');
    const blocked = await cli(['step', '--harbor', dir, env, 'implement']);
    assert.equal(blocked.code, 1);
    assert.match(blocked.stderr, /healthcheck 'test -x \/app\/greet.sh' failed 3 times/);

    await run(
      r,
      env,
      'echo 1 > /logs/verifier/reward.txt; echo "reward() { echo 1 > /logs/verifier/reward.txt; }" > /tests/helpers.sh',
    );
    assert.equal((await graded('scaffold', 0, 'planted reward and rewritten helpers')).reward, 0);
    await run(r, env, 'chmod +x /app/greet.sh');
    const scaffold = await graded('scaffold', 1, 'the scaffold solution');
    assert.deepEqual([scaffold.min_reward, scaffold.early_stop], [1, false]);

    const implement = await cli(['step', '--harbor', dir, env, 'implement']);
    assert.equal(implement.code, 0, implement.stderr);
    assert.match(implement.stdout, /A file `\/app\/config.txt` has been placed/);
    const placed = await run(r, env, 'cat /app/config.txt /app/.setup-ran; ls /app');
    assert.equal(
      placed.stdout,
      'Harbor\n1000\nconfig.txt\ngreet.sh\n',
      'setup.sh ran as the agent and removed itself',
    );
    await graded('implement', 0, "scaffold's script does not greet Harbor yet");
    await run(r, env, 'printf \'#!/bin/sh\\necho "Hello, $(cat /app/config.txt)!"\\n\' > /app/greet.sh');
    const impl = await graded('implement', 1, 'the step env and step-local fixture grade the implementation');
    assert.deepEqual([impl.min_reward, impl.early_stop], [0.5, false]);

    assert.equal((await cli(['step', '--harbor', dir, env, 'document'])).code, 0);
    await run(r, env, "printf '# greet.sh\\n\\nNo config mentioned.\\n' > /app/README.md");
    await graded('document', 0, 'a README without config.txt or usage');
    await run(
      r,
      env,
      "printf '# greet.sh\\n\\nGreets the name in config.txt.\\n\\n```bash\\n./greet.sh\\n```\\n' > /app/README.md",
    );
    const doc = await graded('document', 1, 'the document solution, graded with the shared helpers');
    assert.deepEqual([doc.min_reward, doc.early_stop], [null, false]);

    const unknown = await cli(['verify', '--step', 'deploy', env]);
    assert.equal(unknown.code, 1);
    assert.match(
      unknown.stderr,
      /unknown step 'deploy'; its verifier's steps are scaffold, implement, document/,
    );
  });
});
