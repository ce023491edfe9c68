// The bash probe's output read as the Node probe reports it: every target answered (with bash's
// reason for a refusal) or a timeout, the self-check passed by a loopback answer (accepted or
// refused), and output that did not reach the script's end proves nothing. Run for real in a
// network namespace of its own where one target's packets are dropped: that target is a timeout,
// the run ends at the watchdog, and no process of it is left.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { tier } from '../../test/support/tiers.ts';
import { findBash, parseShellReport, SELF_TARGET, SHELL_PROBE } from './probe-shell.ts';

describe('the bash egress probe', () => {
  it('reads answers, reasons, timeouts and the self-check', () => {
    const out = [
      'probe: connect: Connection refused',
      `probe: line 6: /dev/tcp/127.0.0.1/1: Connection refused`,
      `no ${SELF_TARGET}`,
      'ok 10.0.0.1:80',
      'probe: line 6: /dev/tcp/1.1.1.1/443: Network is unreachable',
      'no 1.1.1.1:443',
      'probe: line 6: /dev/tcp/::1/5: Cannot assign requested address',
      'no [::1]:5',
      'end',
      '',
    ].join('\n');
    assert.deepEqual(parseShellReport(out, ['1.1.1.1:443', '10.0.0.1:80', '8.8.8.8:53', '[::1]:5']), {
      selfcheck: 'ok',
      results: [
        { target: '1.1.1.1:443', ok: false, error: 'Network is unreachable' },
        { target: '10.0.0.1:80', ok: true, error: '' },
        { target: '8.8.8.8:53', ok: false, error: 'timeout' },
        { target: '[::1]:5', ok: false, error: 'Cannot assign requested address' },
      ],
    });
    const noLoopback = `x: /dev/tcp/127.0.0.1/1: Network is unreachable\nno ${SELF_TARGET}\nend\n`;
    assert.equal(parseShellReport(noLoopback, [])?.selfcheck, 'Network is unreachable');
    assert.equal(parseShellReport('end\n', [])?.selfcheck, 'timeout');
  });

  it('output that did not reach the end proves nothing', () => {
    assert.equal(parseShellReport(`ok ${SELF_TARGET}\n`, []), null);
    assert.equal(parseShellReport('', []), null);
  });

  // Root and iptables, as the Docker tier's firewall has.
  it('in a namespace that drops one target: a timeout there, the others answered, nothing left', {
    skip: tier('docker'),
  }, async () => {
    const bash = await findBash();
    assert.ok(bash, 'bash is on this machine');
    const mark = `probe-${randomBytes(4).toString('hex')}`;
    const setup = 'ip link set lo up && iptables -A OUTPUT -d 127.0.0.2 -j DROP && exec "$@"';
    const out = execFileSync(
      'unshare',
      [
        '-n',
        bash,
        '-c',
        setup,
        'setup',
        bash,
        '-c',
        SHELL_PROBE,
        mark,
        '1',
        SELF_TARGET,
        '127.0.0.2:80',
        '1.1.1.1:443',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    const report = parseShellReport(out, ['127.0.0.2:80', '1.1.1.1:443']);
    assert.ok(report, out);
    assert.deepEqual(report, {
      selfcheck: 'ok',
      results: [
        { target: '127.0.0.2:80', ok: false, error: 'timeout' },
        { target: '1.1.1.1:443', ok: false, error: 'Network is unreachable' },
      ],
    });
    const left = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes(mark));
    assert.deepEqual(left, []);
  });

  // The watchdog once ended by a TERM trap, which bash runs only when its `read` returns: now and
  // then the probe waited out its whole timeout for nothing. With a 600 s timeout every run must
  // still end as soon as its connects have answered.
  it('a probe whose connects all answered does not wait for its watchdog', {
    skip: tier('docker'),
  }, async () => {
    const bash = await findBash();
    assert.ok(bash);
    const loop = `ip link set lo up && for i in $(seq 30); do "$@" || exit 1; done`;
    const out = execFileSync(
      'unshare',
      ['-n', bash, '-c', loop, 'loop', bash, '-c', SHELL_PROBE, 'probe', '600', SELF_TARGET, '1.1.1.1:443'],
      { encoding: 'utf8', timeout: 120_000 },
    );
    assert.equal(out.split('\n').filter((l) => l === 'end').length, 30);
  });
});
