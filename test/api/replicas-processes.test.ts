// A live process whose host is on one replica, driven and followed through the others: its
// control messages reach it in the order they were sent or answered, relayed output that is lost
// on the way is a gap for the client (never bytes missing silently), and a follower whose replica
// died stops being sent to. Real Postgres, in-process replicas, a fake sidecar on A; the losses
// are notifications dropped on purpose, as a failed NOTIFY batch or a reconnect would drop them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import type { Frame } from '../../protocol/frames.ts';
import { decodeOutput, encodeOutput } from '../../protocol/processes.ts';
import type { Cluster, Message } from '../../server/cluster/cluster.ts';
import { deploy, joinFake, waitFor } from '../orchestrator/harness.ts';
import { watchAlive } from '../support/alive.ts';
import type { FakeSidecar } from '../support/fake-sidecar.ts';
import { startReplica, startTestServer, type TestServer } from '../support/server.ts';
import { Stream } from '../support/sse.ts';
import { tier } from '../support/tiers.ts';

const TIMING = { heartbeatMs: 100, leaseMs: 600 };
const PROCESS = {
  pid: 'proc_fake',
  service: 'app',
  cmd: ['cat'],
  status: 'running',
  exit_code: null,
  started_at: new Date().toISOString(),
  tty: true,
  stdin: true,
};

/** Drops the notifications `cluster` sends that `drop` picks (as a lost NOTIFY would be lost). */
function lose(cluster: Cluster, drop: (m: Message) => boolean): () => void {
  const send = cluster.send.bind(cluster);
  cluster.send = (to, m) => {
    if (!drop(m)) send(to, m);
  };
  return () => {
    cluster.send = send;
  };
}

const text = (f: Frame) => Buffer.from((f.payload as { data: string }).data, 'base64').toString();
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('a live process on one replica, driven and followed through others', {
  skip: tier('postgres'),
}, () => {
  let a: TestServer;
  let b: TestServer;
  let c: TestServer;
  let sc: FakeSidecar;
  let alpha: string;

  before(async () => {
    a = await startTestServer('postgres', {}, { replica: TIMING });
    b = await startReplica(a, {}, { replica: TIMING });
    c = await startReplica(a, {}, { replica: TIMING });
    sc = await joinFake(a);
    const p = await a.req('POST', '/v1/projects', { body: { name: 'p1' } });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    alpha = p.body.environments[0].ID;
    const done = await deploy({ t: b, sc, project: p.body.project.ID, alpha });
    assert.equal(done.deployment.Status, 'succeeded', JSON.stringify(done));
    sc.handlers['proc.attach'] = () => ({ process: PROCESS });
  });
  after(async () => {
    await sc?.close();
    await c?.close();
    await b?.close();
    await a?.close();
  });

  const proc = () => `/v1/envs/${alpha}/processes/proc_fake`;

  test("a WebSocket's messages through B reach the host on A in the order sent, a lost notification too", async () => {
    const attaches = sc.commands('proc.attach').length;
    const ws = new WebSocket(`${b.url.replace(/^http/, 'ws')}${proc()}/stream`, {
      headers: { authorization: `Bearer ${b.key}` },
    });
    const errors: string[] = [];
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.type === 'error') errors.push(m.error);
    });
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    await waitFor(() => sc.commands('proc.attach').length > attaches, 10_000, 'the attach');
    const inputs = sc.commands('proc.input').length;
    // The first input's notification to A is lost: B offers it again on a later heartbeat.
    let lost = 0;
    const restore = lose(b.server.ctx.cluster, (m) => m.k === 'cmd' && lost++ === 0);
    try {
      for (let i = 0; i < 10; i++) ws.send(JSON.stringify({ type: 'input', data: b64(`${i};`) }));
      ws.send(JSON.stringify({ type: 'resize', rows: 30, cols: 90 }));
      ws.send(JSON.stringify({ type: 'input', data: b64('end;') }));
      await waitFor(() => sc.commands('proc.input').length >= inputs + 11, 10_000, 'every input');
    } finally {
      restore();
      ws.close();
    }
    assert.equal(lost > 1, true, 'a notification was lost');
    const seen = sc
      .commands()
      .filter((f) => f.kind === 'proc.input' || f.kind === 'proc.resize')
      .slice(-12)
      .map((f) => (f.kind === 'proc.resize' ? 'resize' : text(f)));
    assert.deepEqual(seen, [...Array.from({ length: 10 }, (_, i) => `${i};`), 'resize', 'end;']);
    assert.deepEqual(errors, []);
    // Each reached the host once; B waits for nothing more.
    assert.equal(sc.commands('proc.input').length, inputs + 11);
    await waitFor(() => b.server.orchestrator.relay?.counts.lanes === 0, 10_000, "B's lanes to empty");
  });

  test('requests answered in turn on different replicas reach the host in that order', async () => {
    const before = sc.commands().length;
    const steps: [TestServer, string, object][] = [
      [b, 'input', { data: b64('one') }],
      [c, 'input', { data: b64('and') }],
      [a, 'input', { data: b64('two') }],
      [c, 'signal', { signal: 'INT' }],
      [b, 'input', { data: b64('three') }],
    ];
    for (const [t, verb, body] of steps) {
      const r = await t.req('POST', `${proc()}/${verb}`, { body });
      assert.equal(r.status, 204, JSON.stringify(r.body));
    }
    const seen = sc
      .commands()
      .slice(before)
      .filter((f) => f.kind === 'proc.input' || f.kind === 'proc.signal')
      .map((f) => (f.kind === 'proc.input' ? text(f) : f.kind));
    assert.deepEqual(seen, ['one', 'and', 'two', 'proc.signal', 'three']);
  });

  test('relayed output lost on its way to B is a gap on B, never bytes missing silently, at the end too', async () => {
    let follow = '';
    sc.handlers['proc.attach'] = (f) => {
      follow = (f.payload as { follow: string }).follow;
      return { process: PROCESS };
    };
    const s = await new Stream().open(`${b.url}${proc()}/stream`, { authorization: `Bearer ${b.key}` });
    assert.equal(s.status, 200);
    await waitFor(() => follow !== '', 10_000, 'the attach');
    // Seq 2 (one piece) is lost whole; of seq 3 (several pieces) the second piece is lost; the
    // last frame (seq 5) and the first sending of the end are lost, with nothing after them.
    let ends = 0;
    const restore = lose(a.server.ctx.cluster, (m) => {
      if (m.k !== 'out') return false;
      if (m.n === 1) {
        const f = decodeOutput(Buffer.from(m.b, 'base64'));
        if (f.kind === 'end') return ends++ === 0;
        return f.kind === 'stdout' && (f.seq === 2 || f.seq === 5);
      }
      return m.i === 1;
    });
    try {
      const out = (seq: number, data: Buffer) =>
        sc.ws.send(encodeOutput({ kind: 'stdout', follow, seq, data }));
      out(1, Buffer.from('one\n'));
      out(2, Buffer.from('two\n'));
      out(3, Buffer.alloc(30_000, 'x'));
      out(4, Buffer.from('four\n'));
      out(5, Buffer.from('five\n'));
      sc.ws.send(encodeOutput({ kind: 'end', follow, end: { exit_code: 0 } }));
      await s.ended;
    } finally {
      restore();
    }
    const got = s.events.map((e) => e.event as any);
    assert.deepEqual(
      got.map((e) => [e.type, e.seq ?? e.from ?? null, e.to ?? null]),
      [
        ['stdout', 1, null],
        ['gap', 2, 3],
        ['stdout', 4, null],
        ['gap', 5, 5],
        ['end', null, null],
      ],
    );
    // What was half put together on B is not kept.
    await waitFor(() => b.server.orchestrator.relay?.counts.assembling === 0, 10_000, 'no pieces held');
    sc.handlers['proc.attach'] = () => ({ process: PROCESS });
  });

  test('a follower whose replica died is detached on the host; the holder lives on', async () => {
    let follow = '';
    sc.handlers['proc.attach'] = (f) => {
      follow = (f.payload as { follow: string }).follow;
      return { process: PROCESS };
    };
    const s = await new Stream().open(`${c.url}${proc()}/stream`, { authorization: `Bearer ${c.key}` });
    assert.equal(s.status, 200);
    await waitFor(() => follow !== '', 10_000, 'the attach');
    await waitFor(() => a.server.orchestrator.relay?.counts.follows === 1, 10_000, 'A to relay to C');
    const alive = watchAlive();
    // C stops as a killed process would: nothing sent, nothing cleaned up.
    await c.server.ctx.cluster.abandon();
    s.close();
    const detached = () =>
      sc.commands('proc.detach').filter((f) => (f.payload as { follow: string }).follow === follow);
    await waitFor(() => detached().length > 0, 10_000, 'the host to be told to detach');
    assert.equal(detached().length, 1);
    assert.equal(a.server.orchestrator.relay?.counts.follows, 0);
    // Output the host still sends for it goes nowhere and harms nothing.
    sc.ws.send(encodeOutput({ kind: 'stdout', follow, seq: 1, data: Buffer.from('late') }));
    await alive.assertAliveAfter(a.url, TIMING.leaseMs * 2);
  });
});
