// A terminal in a service of an environment: xterm.js over the process WebSocket. Start runs the
// command with a PTY sized to the terminal (POST /v1/envs/{env}/processes), then attaches
// (GET …/processes/{pid}/stream as a WebSocket): output frames are written to the terminal,
// keystrokes go as `input`, a new size (the page or the panel resized) as `resize`, and the
// process's end is shown. Browsers cannot set headers on a WebSocket, so the session travels as
// a subprotocol (`svc.bearer.<token>`), never in the URL. Leaving the page hangs the shell up.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api } from './api.ts';
import { session } from './session.ts';
import { withStyleNonce } from './style-nonce.ts';
import { ErrorNote } from './ui.tsx';

type State = 'idle' | 'starting' | 'attached' | 'ended';

interface Live {
  term: Terminal;
  ws: WebSocket | null;
  observer: ResizeObserver;
}

const encoder = new TextEncoder();

function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64(data: string): Uint8Array {
  const s = atob(data);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** Input is sent in pieces the API takes (64 KiB of bytes each: a large paste is split). */
const MAX_INPUT = 48 * 1024;

function streamUrl(envId: string, pid: string): string {
  const scheme = window.location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${window.location.host}/v1/envs/${encodeURIComponent(envId)}/processes/${encodeURIComponent(pid)}/stream`;
}

function protocols(): string[] {
  const list = ['svc.v1', `svc.bearer.${session.token()}`];
  const team = session.team();
  if (team) list.push(`svc.team.${team}`);
  return list;
}

function endText(e: { exit_code: number | null; signal?: string; reason?: string }): string {
  if (e.signal) return `killed by SIG${e.signal}`;
  if (e.exit_code !== null) return `exited with code ${e.exit_code}`;
  return `ended: ${e.reason ?? 'the stream stopped'}`;
}

export function TerminalPanel({ envId, services }: { envId: string; services: string[] }) {
  const [service, setService] = useState(services[0] ?? '');
  const [command, setCommand] = useState('sh');
  const [state, setState] = useState<State>('idle');
  const [size, setSize] = useState('');
  const [ended, setEnded] = useState('');
  const [error, setError] = useState('');
  const box = useRef<HTMLDivElement>(null);
  const live = useRef<Live | null>(null);
  const ids = useId();

  useEffect(() => {
    if (!service && services[0]) setService(services[0]);
  }, [services.join(' ')]);

  const stop = () => {
    const l = live.current;
    live.current = null;
    if (!l) return;
    l.observer.disconnect();
    if (l.ws && l.ws.readyState === WebSocket.OPEN) {
      // A terminal closed is a hang-up, as for any shell whose terminal goes away.
      l.ws.send(JSON.stringify({ type: 'signal', signal: 'HUP' }));
      l.ws.close(1000, 'closed');
    }
    l.term.dispose();
  };
  useEffect(() => {
    // Closing the tab does not unmount the page: hang up then too (best effort, as the page goes).
    window.addEventListener('pagehide', stop);
    return () => {
      window.removeEventListener('pagehide', stop);
      stop();
    };
  }, []);

  const start = async () => {
    stop();
    setError('');
    setEnded('');
    const el = box.current;
    const cmd = command.trim().split(/\s+/).filter(Boolean);
    if (!el || !service || cmd.length === 0) return;
    setState('starting');
    const term = new Terminal({
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, monospace',
      fontSize: 14,
      cursorBlink: true,
      scrollback: 5000,
      theme: { background: '#1b1f24', foreground: '#e6edf3' },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    // Shown before it is measured (the re-render that would show it comes later).
    el.classList.remove('term-box-idle');
    withStyleNonce(() => {
      term.open(el);
      fit.fit();
    });
    const l: Live = { term, ws: null, observer: new ResizeObserver(() => refit()) };
    live.current = l;
    const refit = () => {
      if (live.current !== l || el.clientWidth === 0) return;
      withStyleNonce(() => fit.fit());
    };
    const showSize = () => setSize(`${term.cols} columns × ${term.rows} rows`);
    showSize();
    let pid: string;
    try {
      ({ pid } = await api.startProcess(envId, {
        service,
        cmd,
        stdin: true,
        tty: { rows: term.rows, cols: term.cols },
        env: { TERM: 'xterm-256color' },
      }));
    } catch (err) {
      if (live.current === l) stop();
      setState('idle');
      setError((err as Error).message);
      return;
    }
    if (live.current !== l) return;
    let ws: WebSocket;
    try {
      ws = new WebSocket(streamUrl(envId, pid), protocols());
    } catch (err) {
      stop();
      setState('idle');
      setError(`could not attach: ${(err as Error).message}`);
      return;
    }
    l.ws = ws;
    const send = (msg: object) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
    };
    const input = (bytes: Uint8Array) => {
      for (let i = 0; i < bytes.length; i += MAX_INPUT)
        send({ type: 'input', data: toBase64(bytes.subarray(i, i + MAX_INPUT)) });
    };
    term.onData((d) => input(encoder.encode(d)));
    term.onBinary((d) => input(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)));
    term.onResize(({ rows, cols }) => {
      showSize();
      send({ type: 'resize', rows, cols });
    });
    ws.onopen = () => {
      if (live.current !== l) return;
      setState('attached');
      // The page may have changed size while the process started.
      refit();
      send({ type: 'resize', rows: term.rows, cols: term.cols });
      l.observer.observe(el);
      term.focus();
    };
    ws.onmessage = (m) => {
      if (live.current !== l || typeof m.data !== 'string') return;
      let e: { type?: string; data?: string; from?: number; to?: number; error?: string };
      try {
        e = JSON.parse(m.data);
      } catch {
        return;
      }
      if ((e.type === 'stdout' || e.type === 'stderr') && typeof e.data === 'string')
        term.write(fromBase64(e.data));
      else if (e.type === 'gap') term.write(`\r\n\x1b[7m[output ${e.from}–${e.to} was dropped]\x1b[0m\r\n`);
      else if (e.type === 'error') setError(e.error ?? 'refused');
      else if (e.type === 'end') {
        const text = endText(e as { exit_code: number | null });
        term.write(`\r\n\x1b[7m[process ${text}]\x1b[0m\r\n`);
        setEnded(`The process ${text}.`);
        setState('ended');
      }
    };
    ws.onclose = (c) => {
      if (live.current !== l) return;
      l.observer.disconnect();
      setState('ended');
      setEnded((prev) => prev || `Disconnected${c.reason ? `: ${c.reason}` : ''}.`);
    };
  };

  return (
    <section aria-labelledby={`${ids}-h`}>
      <h2 id={`${ids}-h`}>Terminal</h2>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          void start();
        }}
      >
        <label>
          Service
          <select value={service} onChange={(e) => setService(e.currentTarget.value)}>
            {services.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Command
          <input value={command} maxLength={1000} onInput={(e) => setCommand(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={!service || state === 'starting'}>
          {state === 'attached' ? 'Restart terminal' : 'Open terminal'}
        </button>
        {state === 'attached' && (
          <button
            type="button"
            onClick={() => {
              stop();
              setState('ended');
              setEnded('Closed.');
            }}
          >
            Close terminal
          </button>
        )}
      </form>
      <ErrorNote error={error} />
      <p role="status">
        {state === 'starting' && 'Starting…'}
        {state === 'attached' && `Attached to ${service}: ${size}`}
        {state === 'ended' && ended}
      </p>
      <div ref={box} class={state === 'idle' ? 'term-box term-box-idle' : 'term-box'} />
    </section>
  );
}
