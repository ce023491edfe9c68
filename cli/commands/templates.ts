// `templates` (GET /v1/templates) and `init` (writes a template's compose text to a new file).
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import type { Command } from '../command.ts';
import { CliError } from '../errors.ts';
import { HEADER } from '../harbor.ts';
import { harborCompose } from '../task-compose.ts';
import { isTerminalBench, stageTerminalBench, terminalBenchDoc } from '../terminal-bench.ts';

/** Single-quotes a word for a POSIX shell. */
export const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const maybeQuote = (s: string): string => (/^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : quote(s));

export const templates: Command = {
  words: ['templates'],
  summary: 'List the starter compose files (GET /v1/templates)',
  flags: [
    { name: 'kind', type: 'string', value: 'K', help: 'Only templates of this kind (rl-environment, agent)' },
  ],
  positionals: [],
  async run(ctx) {
    const kind = ctx.flags.kind as string | undefined;
    ctx.io.json(await ctx.client().call('get', '/v1/templates', { query: kind ? { kind } : {} }));
    return 0;
  },
};

const exists = (out: string) =>
  new CliError(`${out} already exists: not overwriting it (choose another file with --out)`);

export const init: Command = {
  words: ['init'],
  summary: 'Write the compose file of the first template whose name or kind matches',
  details:
    'Refuses to overwrite an existing file. When the template has a warm command, prints the\n' +
    'deploy invocation that runs it.',
  flags: [
    { name: 'out', type: 'string', value: 'compose.yaml', default: 'compose.yaml', help: 'File to write' },
    {
      name: 'from-harbor',
      type: 'string',
      value: 'DIR',
      help: "Write DIR/compose.yaml for a Harbor task folder (a Terminal-Bench one: DIR-svc/, in Harbor's layout)",
    },
  ],
  positionals: [{ name: 'kind or template', optional: true }],
  async run(ctx) {
    const [want] = ctx.args;
    if (ctx.flags['from-harbor'] !== undefined) return initHarbor(ctx.io, String(ctx.flags['from-harbor']));
    if (!want) throw new CliError('init needs a kind or template name (or --from-harbor DIR)');
    const out = ctx.flags.out as string;
    if (existsSync(out)) throw exists(out);
    const r = await ctx.client().call('get', '/v1/templates', {});
    const t = r.templates.find((x) => x.name === want || x.kind === want);
    if (!t) {
      const known = r.templates.map((x) => `${x.name} (${x.kind})`).join(', ');
      throw new CliError(`no template named or of kind '${want}'; templates: ${known}`);
    }
    try {
      writeFileSync(out, t.compose, { flag: 'wx', mode: 0o644 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw exists(out);
      throw new CliError(
        `cannot write ${out}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
    ctx.io.out(`wrote ${out} from template ${t.name} (${t.kind})\n`);
    if (t.warm?.length) {
      ctx.io.out(
        `deploy it with: svc deploy --project <project> -f ${maybeQuote(out)} --warm ${quote(t.warm.join(' '))}\n`,
      );
    }
    return 0;
  },
};

/**
 * A Terminal-Bench task is written in Harbor's layout next to it (<DIR>-svc/), since its tests and
 * run-tests.sh sit inside its build context; a Harbor task gets DIR/compose.yaml.
 */
function initTerminalBench(io: { out(s: string): void }, dir: string): number {
  const out = `${resolve(dir)}-svc`;
  if (existsSync(out)) throw new CliError(`${out} already exists: not overwriting it`);
  try {
    const { parser } = stageTerminalBench(dir, out);
    writeFileSync(join(out, 'compose.yaml'), HEADER + stringify(terminalBenchDoc(out, parser)), {
      mode: 0o644,
    });
  } catch (err) {
    rmSync(out, { recursive: true, force: true });
    throw err;
  }
  io.out(`wrote ${out}/ (the Terminal-Bench task in ${dir}, in Harbor's layout) with compose.yaml\n`);
  io.out(`deploy it with: svc deploy --project <project> -f ${maybeQuote(join(out, 'compose.yaml'))}\n`);
  return 0;
}

function initHarbor(io: { out(s: string): void }, dir: string): number {
  if (isTerminalBench(dir)) return initTerminalBench(io, dir);
  const { compose } = harborCompose(dir);
  const out = join(dir, 'compose.yaml');
  try {
    writeFileSync(out, compose, { flag: 'wx', mode: 0o644 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw exists(out);
    throw new CliError(
      `cannot write ${out}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  io.out(`wrote ${out} from the Harbor task in ${dir}\n`);
  io.out(`deploy it with: svc deploy --project <project> -f ${maybeQuote(out)}\n`);
  return 0;
}
