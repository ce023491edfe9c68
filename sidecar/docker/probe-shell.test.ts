// The bash probe's output read as the Node probe reports it: every target answered or a timeout,
// the self-check passed by a loopback answer (accepted or refused), and output that did not reach
// the script's end (killed, or another program) proves nothing.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { findBash, parseShellReport, SELF_TARGET, SHELL_PROBE } from './probe-shell.ts';

describe('the bash egress probe', () => {
  it('reads answers, timeouts and the self-check', () => {
    const out = `no ${SELF_TARGET} Connection refused\nok 10.0.0.1:80\nno 1.1.1.1:443 Network is unreachable\nend\n`;
    assert.deepEqual(parseShellReport(out, ['1.1.1.1:443', '10.0.0.1:80', '8.8.8.8:53']), {
      selfcheck: 'ok',
      results: [
        { target: '1.1.1.1:443', ok: false, error: 'Network is unreachable' },
        { target: '10.0.0.1:80', ok: true, error: '' },
        { target: '8.8.8.8:53', ok: false, error: 'timeout' },
      ],
    });
    const noLoopback = `no ${SELF_TARGET} Network is unreachable\nend\n`;
    assert.equal(parseShellReport(noLoopback, [])?.selfcheck, 'Network is unreachable');
    assert.equal(parseShellReport('end\n', [])?.selfcheck, 'timeout');
  });

  it('output that did not reach the end, or is not the script’s, proves nothing', () => {
    assert.equal(parseShellReport(`ok ${SELF_TARGET}\n`, []), null);
    assert.equal(parseShellReport('', []), null);
    assert.equal(parseShellReport('hello\nend\n', []), null);
  });

  it('run by bash on this host: a closed loopback port is refused, a timeout is bounded', async () => {
    const bash = await findBash();
    assert.ok(bash, 'bash is on this machine');
    // 192.0.2.1 (TEST-NET-1) may be dropped, refused or (behind an intercepting proxy) accepted:
    // whichever, the run ends within the timeout and names it.
    const out = execFileSync(bash, ['-c', SHELL_PROBE, 'probe', '1', SELF_TARGET, '192.0.2.1:9'], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    const report = parseShellReport(out, ['192.0.2.1:9']);
    assert.ok(report, out);
    assert.equal(report.selfcheck, 'ok');
    assert.equal(report.results[0].target, '192.0.2.1:9');
  });
});
