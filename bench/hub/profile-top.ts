// The heaviest functions of a V8 CPU profile (from `--cpu-prof`), by self time and by total time
// (self plus callees), so a benchmark run can say where the control plane's CPU went.
//   node bench/hub/profile-top.ts FILE.cpuprofile [--top 25] [--last SECONDS]
// --last keeps only the final SECONDS of the profile: svc-server is stopped right after the HTTP
// exec window, so `--last 10` of its profile is that window without the setup before it.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  options: { top: { type: 'string', default: '25' }, last: { type: 'string' } },
  allowPositionals: true,
});
if (positionals.length !== 1) throw new Error('usage: profile-top.ts FILE.cpuprofile [--top 25] [--last S]');
const profile = JSON.parse(readFileSync(positionals[0], 'utf8')) as Profile;
const TOP = Number(values.top);

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const label = (n: Node) => {
  const f = n.callFrame;
  const file = f.url.replace(/^file:\/\//, '').replace(/^.*\/(node_modules|work\/main)\//, '$1/');
  return `${f.functionName || '(anonymous)'} ${file ? `${file}:${f.lineNumber + 1}` : ''}`.trim();
};

const self = new Map<string, number>();
const total = new Map<string, number>();
let all = 0;
const at: number[] = [];
let elapsed = 0;
for (const dt of profile.timeDeltas) {
  elapsed += dt;
  at.push(elapsed);
}
const from = values.last ? (at.at(-1) ?? 0) - Number(values.last) * 1e6 : -1;
profile.samples.forEach((id, i) => {
  if ((at[i] ?? 0) < from) return;
  const dt = profile.timeDeltas[i] ?? 0;
  all += dt;
  const leaf = byId.get(id)!;
  self.set(label(leaf), (self.get(label(leaf)) ?? 0) + dt);
  const seen = new Set<string>();
  for (let n: Node | undefined = leaf; n; n = byId.get(parent.get(n.id) ?? -1)) {
    const l = label(n);
    if (seen.has(l)) continue; // recursion counts once
    seen.add(l);
    total.set(l, (total.get(l) ?? 0) + dt);
  }
});

const print = (title: string, m: Map<string, number>) => {
  process.stdout.write(`\n${title} (of ${(all / 1e6).toFixed(1)} s sampled)\n`);
  for (const [l, t] of [...m].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    process.stdout.write(`${((t * 100) / all).toFixed(1).padStart(5)}%  ${l}\n`);
  }
};
print('self time', self);
print('total time', total);
