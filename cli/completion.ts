// `svc completion bash|zsh`: completion scripts generated from the command records, so every
// verb, subverb and flag is offered, plus the few fixed values the spec names.
import { SIGNALS } from '../protocol/processes.ts';
import type { Command, FlagSpec } from './command.ts';

/** Fixed values for some flags and first positionals, keyed `<words> <flag or #0>`. */
const VALUES: Record<string, string[]> = {
  'templates --kind': ['rl-environment', 'agent'],
  'project create --kind': ['rl-environment', 'agent'],
  'init #0': ['rl-environment', 'agent', 'rl-environment-ops', 'agent-runtime'],
  'cloud connect #0': ['manual', 'cloudvm', 'sandbox-a', 'sandbox-b'],
  'completion #0': ['bash', 'zsh'],
  'kill --signal': [...SIGNALS],
};

const flagWords = (flags: FlagSpec[]): string[] => {
  const out: string[] = [];
  for (const f of flags) {
    if (f.short) out.push(`-${f.short}`);
    out.push(`--${f.name}`);
    if (f.type === 'boolean' && f.default === true) out.push(`--${f.name}=false`);
  }
  out.push('--help');
  return out;
};

/** Commands grouped by their first word, in first-seen order. */
function groups(commands: readonly Command[]): Map<string, Command[]> {
  const m = new Map<string, Command[]>();
  for (const c of commands) m.set(c.words[0], [...(m.get(c.words[0]) ?? []), c]);
  return m;
}

const key = (c: Command) => c.words.join(' ');
const stringFlags = (c: Command) =>
  c.flags
    .filter((f) => f.type === 'string')
    .flatMap((f) => (f.short ? [`-${f.short}`, `--${f.name}`] : [`--${f.name}`]));

function bash(commands: readonly Command[]): string {
  const g = groups(commands);
  const subCases = [...g]
    .filter(([, cs]) => cs[0].words.length > 1)
    .map(
      ([verb, cs]) =>
        `      ${verb}) COMPREPLY=($(compgen -W "${cs.map((c) => c.words[1]).join(' ')}" -- "$cur")); return ;;`,
    );
  const flagCases = commands.map(
    (c) =>
      `      "${key(c)}") flags="${flagWords(c.flags).join(' ')}"; valued="${stringFlags(c).join(' ')}" ;;`,
  );
  const valueCases = Object.entries(VALUES).map(
    ([k, v]) => `      "${k}") COMPREPLY=($(compgen -W "${v.join(' ')}" -- "$cur")); return ;;`,
  );
  const grouped = [...g].filter(([, cs]) => cs[0].words.length > 1).map(([v]) => v);
  return `# bash completion for svc. Load with: source <(svc completion bash)
_svc() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local verb="\${COMP_WORDS[1]}" start=2 flags="" valued="" cmd
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${[...g.keys()].join(' ')} --help" -- "$cur")); return
  fi
  cmd="$verb"
  case "$verb" in
    ${grouped.join('|')})
      if [ "$COMP_CWORD" -eq 2 ]; then
        case "$verb" in
${subCases.join('\n')}
        esac
      fi
      cmd="$verb \${COMP_WORDS[2]}"; start=3 ;;
  esac
  case "$cmd" in
${flagCases.join('\n')}
  esac
  local i npos=0 flagsdone=0
  for ((i = start; i < COMP_CWORD; i++)); do
    local w="\${COMP_WORDS[i]}"
    if [ "$flagsdone" -eq 0 ] && [[ "$w" == -* && "$w" != "--" ]]; then
      [[ " $valued " == *" $w "* ]] && ((i++))
    else
      flagsdone=1; npos=$((npos + 1))
    fi
  done
  if [[ " $valued " == *" $prev "* ]] && [ "$npos" -eq 0 ]; then
    case "$cmd $prev" in
${valueCases.filter((l) => l.includes(' --')).join('\n')}
    esac
    COMPREPLY=($(compgen -f -- "$cur")); return
  fi
  if [ "$npos" -eq 0 ] && [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur")); return
  fi
  case "$cmd #$npos" in
${valueCases.filter((l) => l.includes(' #')).join('\n')}
  esac
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o default -F _svc svc
`;
}

/** A zsh single-quoted `word:description` item. */
const zitem = (word: string, desc: string) =>
  `'${`${word}:${desc.replace(/:/g, '\\:')}`.replace(/'/g, `'\\''`)}'`;

function zsh(commands: readonly Command[]): string {
  const g = groups(commands);
  const verbs = [...g].map(([verb, cs]) =>
    zitem(verb, cs.length > 1 || cs[0].words.length > 1 ? `${verb} commands` : cs[0].summary),
  );
  const subCases = [...g]
    .filter(([, cs]) => cs[0].words.length > 1)
    .map(
      ([verb, cs]) => `      (${verb}) subs=(${cs.map((c) => zitem(c.words[1], c.summary)).join(' ')}) ;;`,
    );
  const grouped = [...g].filter(([, cs]) => cs[0].words.length > 1).map(([v]) => v);
  const flagCases = commands.map(
    (c) =>
      `    ("${key(c)}") flags=(${flagWords(c.flags).join(' ')}); valued=(${stringFlags(c).join(' ')}) ;;`,
  );
  const valueCases = Object.entries(VALUES).map(
    ([k, v]) => `    ("${k}") compadd -- ${v.join(' ')}; return ;;`,
  );
  return `#compdef svc
# zsh completion for svc. Load with: source <(svc completion zsh)   (after compinit)
_svc() {
  local -a verbs subs flags valued
  verbs=(${verbs.join(' ')})
  if (( CURRENT == 2 )); then _describe 'command' verbs; return; fi
  local verb=\${words[2]} cmd=\${words[2]} start=3
  case $verb in
    (${grouped.join('|')})
      if (( CURRENT == 3 )); then
        case $verb in
${subCases.join('\n')}
        esac
        _describe 'subcommand' subs; return
      fi
      cmd="$verb \${words[3]}"; start=4 ;;
  esac
  case $cmd in
${flagCases.join('\n')}
  esac
  local i npos=0 flagsdone=0 w
  for (( i = start; i < CURRENT; i++ )); do
    w=\${words[i]}
    if (( ! flagsdone )) && [[ $w == -* && $w != -- ]]; then
      (( \${valued[(Ie)$w]} )) && (( i++ ))
    else
      flagsdone=1; (( npos++ ))
    fi
  done
  local prev=\${words[CURRENT-1]}
  if (( npos == 0 )) && (( \${valued[(Ie)$prev]} )); then
    case "$cmd $prev" in
${valueCases.filter((l) => l.includes(' --')).join('\n')}
    esac
    _files; return
  fi
  if (( npos == 0 )) && [[ \${words[CURRENT]} == -* ]]; then compadd -- $flags; return; fi
  case "$cmd #$npos" in
${valueCases.filter((l) => l.includes(' #')).join('\n')}
  esac
  _files
}
if (( $+functions[compdef] )); then compdef _svc svc; fi
`;
}

export function completionScript(shell: 'bash' | 'zsh', commands: readonly Command[]): string {
  // Verbs that only say they are not available are not offered.
  const offered = commands.filter((c) => !c.unavailable);
  return shell === 'bash' ? bash(offered) : zsh(offered);
}
