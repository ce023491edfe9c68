// x-svc.verifier.tests (a directory of the project context, mounted read-only at /tests in the
// grader's fork only) and x-svc.verifier.env (variables for the verifier run only).
import type { VerifierSpec } from '../../protocol/spec.ts';
import { contextKind, type ProjectContext, resolveContextPath } from './context.ts';
import { asMap, fail, isMap, type Node, scalarText } from './tree.ts';

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;

export function verifierExtras(tests: Node | undefined, env: Node | undefined): Partial<VerifierSpec> {
  const out: Partial<VerifierSpec> = {};
  if (tests !== undefined) out.tests = scalarText(tests, 'x-svc.verifier.tests');
  if (env !== undefined) {
    const vars: [string, string][] = [];
    for (const [k, v] of asMap(env, 'x-svc.verifier.env')) {
      if (!ENV_KEY.test(k)) fail(`x-svc.verifier.env: '${k.slice(0, 60)}' is not a variable name`);
      if (v === null || isMap(v) || Array.isArray(v)) fail(`x-svc.verifier.env.${k} must be a string`);
      vars.push([k, scalarText(v, `x-svc.verifier.env.${k}`)]);
    }
    out.env = Object.fromEntries(vars);
  }
  return out;
}

/** Resolves `tests` against the project context: a directory inside it, or a refusal by name. */
export function resolveVerifierTests(
  verifier: VerifierSpec | null,
  project: ProjectContext | undefined,
): void {
  if (!verifier || verifier.tests === undefined) return;
  if (!project) {
    fail(
      "x-svc.verifier.tests needs the project's files; deploy with its context (`svc deploy` uploads the compose file's directory)",
    );
  }
  const path = resolveContextPath(project, verifier.tests, 'x-svc.verifier.tests');
  if (path === '' || contextKind(project, path) !== 'dir') {
    fail(`x-svc.verifier.tests: '${verifier.tests}' is not a directory of the project (below its root)`);
  }
  verifier.tests = path;
}
