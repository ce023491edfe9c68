// The client side of bench/processes, in its own process so that the control plane's RSS (the
// parent's) holds no client memory and the clients' CPU is not on the control plane's event loop.
// Prints one JSON object per line on stdout: `{"ready":true}` once attached, then the result.
//
//   clients.ts drain <url> <key> <env> <pid> sse|ws
//     One follower of `pid`; counts output bytes without decoding them, notes gaps and the end.
//   clients.ts follow <url> <key> <env> <pid,pid,...> <followers> <seconds> <hz>
//     `followers` WebSocket followers spread over the pids (processes running `cat`), then every
//     1/hz s writes `<tick> <epoch ms>\n` to each process's stdin through the API; every follower
//     records, per line it receives, now − the time in the line (input → process → every client).
import { WebSocket } from 'ws';

const [mode, url, key, env, pidArg, ...rest] = process.argv.slice(2);
const now = () => performance.timeOrigin + performance.now();
const say = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);
const wsUrl = (pid: string) => `${url.replace(/^http/, 'ws')}/v1/envs/${env}/processes/${pid}/stream`;
const pct = (sorted: number[], p: number) =>
  sorted.length
    ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
    : NaN;

/** Output bytes an event's base64 `data` holds, read from its JSON text without parsing it. */
function outputBytes(json: string): number {
  const at = json.indexOf('"data":"');
  if (at < 0) return 0;
  const from = at + 8;
  const to = json.indexOf('"', from);
  let pad = 0;
  if (json.charCodeAt(to - 1) === 61) pad = json.charCodeAt(to - 2) === 61 ? 2 : 1;
  return ((to - from) / 4) * 3 - pad;
}

interface Tally {
  bytes: number;
  frames: number;
  gaps: number;
  first: number;
  end: number;
  exit?: unknown;
}

function count(t: Tally, json: string): void {
  if (json.startsWith('{"type":"stdout"') || json.startsWith('{"type":"stderr"')) {
    if (!t.first) t.first = now();
    t.bytes += outputBytes(json);
    t.frames++;
  } else if (json.includes('"type":"gap"')) t.gaps++;
  else if (json.includes('"type":"end"')) {
    t.end = now();
    t.exit = JSON.parse(json);
  }
}

async function drainSse(pid: string): Promise<Tally> {
  const t: Tally = { bytes: 0, frames: 0, gaps: 0, first: 0, end: 0 };
  const r = await fetch(`${url}/v1/envs/${env}/processes/${pid}/stream`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
  });
  if (r.status !== 200) throw new Error(`SSE: HTTP ${r.status} ${await r.text()}`);
  say({ ready: true });
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
    buf += dec.decode(chunk, { stream: true });
    let from = 0;
    for (let i = buf.indexOf('\n\n', from); i >= 0; i = buf.indexOf('\n\n', from)) {
      if (buf.startsWith('data: ', from)) count(t, buf.slice(from + 6, i));
      from = i + 2;
    }
    buf = buf.slice(from);
    if (t.end) break;
  }
  return t;
}

function drainWs(pid: string): Promise<Tally> {
  const t: Tally = { bytes: 0, frames: 0, gaps: 0, first: 0, end: 0 };
  const ws = new WebSocket(wsUrl(pid), { headers: { authorization: `Bearer ${key}` } });
  return new Promise((resolve, reject) => {
    ws.on('open', () => say({ ready: true }));
    ws.on('message', (d) => {
      count(t, d.toString());
      if (t.end) ws.close();
    });
    ws.on('close', () => resolve(t));
    ws.on('error', reject);
    ws.on('unexpected-response', (_q, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
}

async function follow(pids: string[], followers: number, seconds: number, hz: number): Promise<void> {
  const lat: number[] = [];
  let gaps = 0;
  let lines = 0;
  let closedEarly = 0;
  let done = false;
  const open = async (pid: string) => {
    const ws = new WebSocket(wsUrl(pid), { headers: { authorization: `Bearer ${key}` } });
    let buf = '';
    ws.on('message', (d) => {
      const e = JSON.parse(d.toString()) as { type: string; data?: string };
      if (e.type === 'gap') gaps++;
      if (e.type !== 'stdout' || !e.data) return;
      const at = now();
      buf += Buffer.from(e.data, 'base64').toString('latin1');
      let nl = buf.indexOf('\n');
      for (; nl >= 0; nl = buf.indexOf('\n')) {
        const sent = Number(buf.slice(buf.indexOf(' ') + 1, nl));
        buf = buf.slice(nl + 1);
        lines++;
        lat.push(at - sent);
      }
    });
    ws.on('close', () => {
      if (!done) closedEarly++;
    });
    await new Promise<void>((resolve, reject) => {
      ws.on('open', () => resolve());
      ws.on('error', reject);
      ws.on('unexpected-response', (_q, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    });
    return ws;
  };
  const sockets: WebSocket[] = [];
  // Attach in batches: a thousand upgrades at once would measure the attach storm, not the follow.
  for (let i = 0; i < followers; i += 50) {
    const batch = [];
    for (let j = i; j < Math.min(followers, i + 50); j++) batch.push(open(pids[j % pids.length]));
    sockets.push(...(await Promise.all(batch)));
  }
  say({ ready: true, followers: sockets.length });
  const input = async (pid: string, tick: number) => {
    const data = Buffer.from(`${tick} ${now()}\n`).toString('base64');
    const r = await fetch(`${url}/v1/envs/${env}/processes/${pid}/input`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data }),
    });
    if (r.status !== 204) throw new Error(`input: HTTP ${r.status} ${await r.text()}`);
  };
  const ticks = Math.round(seconds * hz);
  const t0 = now();
  for (let tick = 0; tick < ticks; tick++) {
    const wait = t0 + (tick * 1000) / hz - now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await Promise.all(pids.map((pid) => input(pid, tick)));
  }
  await new Promise((r) => setTimeout(r, 1000)); // the last lines arrive
  done = true;
  for (const ws of sockets) ws.close();
  lat.sort((a, b) => a - b);
  say({
    followers: sockets.length,
    processes: pids.length,
    ticks,
    lines,
    expected: ticks * sockets.length,
    gaps,
    closedEarly,
    p50: pct(lat, 50),
    p99: pct(lat, 99),
    max: lat.at(-1),
  });
}

try {
  if (mode === 'drain') {
    const c0 = process.cpuUsage();
    const t = rest[0] === 'ws' ? await drainWs(pidArg) : await drainSse(pidArg);
    const c = process.cpuUsage(c0);
    say({ ...t, cpuMs: (c.user + c.system) / 1000 });
  } else if (mode === 'follow') {
    await follow(pidArg.split(','), Number(rest[0]), Number(rest[1]), Number(rest[2]));
  } else throw new Error(`unknown mode ${mode}`);
  process.exit(0);
} catch (err) {
  say({ error: (err as Error).message });
  process.exit(1);
}
