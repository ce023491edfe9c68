// A terminal in a service of an environment: xterm.js over the process WebSocket. Start runs the
// command with a PTY sized to the terminal (POST /v1/envs/{env}/processes), then attaches
// (GET …/processes/{pid}/stream as a WebSocket): output frames are written to the terminal,
// keystrokes go as `input`, a new size (the page or the panel resized) as `resize`, and the
// process's end is shown. Browsers cannot set headers on a WebSocket, so the session travels as
// a subprotocol (`svc.bearer.<token>`), never in the URL. Leaving the page hangs the shell up.
// A dropped WebSocket (a server restart, the network) leaves the process running: the terminal
// offers to re-attach with `since` = the last sequence number it showed, so what the process
// printed meanwhile (as far as its buffer holds) is shown and nothing twice. A process the page
// could never attach to, or leaves detached, is hung up through the signal route.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api } from './api.ts';
import { session } from './session.ts';
import { withStyleNonce } from './style-nonce.ts';
import { ErrorNote, ServicePicker, useService } from './ui.tsx';

type State = 'idle' | 'starting' | 'attached' | 'detached' | 'ended';

interface Live {
  term: Terminal;
  ws: WebSocket | null;
  observer: ResizeObserver;
  /** The process, once started. */
  pid: string;
  /** The last output sequence number shown (a gap's end counts): a re-attach asks for what follows. */
  seq: number;
  /** Its end was shown: nothing to hang up or re-attach to. */
  ended: boolean;
  reattach: () => void;
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
  const [service, setService] = useService(services);
  const [command, setCommand] = useState('sh');
  const [state, setState] = useState<State>('idle');
  const [size, setSize] = useState('');
  const [ended, setEnded] = useState('');
  const [error, setError] = useState('');
  const box = useRef<HTMLDivElement>(null);
  const live = useRef<Live | null>(null);
  const ids = useId();

  const stop = () => {
    const l = live.current;
    live.current = null;
    if (!l) return;
    l.observer.disconnect();
    if (l.ws && l.ws.readyState === WebSocket.OPEN) {
      // A terminal closed is a hang-up, as for any shell whose terminal goes away.
      l.ws.send(JSON.stringify({ type: 'signal', signal: 'HUP' }));
      l.ws.close(1000, 'closed');
    } else if (l.pid && !l.ended) {
      // Detached: the hang-up goes the other way (best effort: it may have ended meanwhile).
      api.hangUp(envId, l.pid).catch(() => {});
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
    const l: Live = {
      term,
      ws: null,
      observer: new ResizeObserver(() => refit()),
      pid: '',
      seq: 0,
      ended: false,
      reattach: () => attach(false),
    };
    live.current = l;
    const refit = () => {
      if (live.current !== l || el.clientWidth === 0) return;
      withStyleNonce(() => fit.fit());
    };
    const showSize = () => setSize(`${term.cols} columns × ${term.rows} rows`);
    showSize();
    try {
      ({ pid: l.pid } = await api.startProcess(envId, {
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
    const send = (msg: object) => {
      const ws = l.ws;
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
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

    /** Opens the stream (`first`: right after the start; else again, after what was shown). */
    function attach(first: boolean) {
      if (live.current !== l) return;
      const url = `${streamUrl(envId, l.pid)}${l.seq ? `?since=${l.seq}` : ''}`;
      let ws: WebSocket;
      let opened = false;
      const neverAttached = (why: string) => {
        // Nobody will ever type into it or see it: hang it up rather than leave it running.
        if (first) api.hangUp(envId, l.pid).catch(() => {});
        if (live.current !== l) return;
        l.observer.disconnect();
        setState(first ? 'ended' : 'detached');
        setError(`could not attach: ${why}${first ? '; the process was hung up' : ''}`);
      };
      try {
        ws = new WebSocket(url, protocols());
      } catch (err) {
        neverAttached((err as Error).message);
        return;
      }
      l.ws = ws;
      ws.onopen = () => {
        opened = true;
        if (live.current !== l || l.ws !== ws) return;
        setState('attached');
        setError('');
        setEnded('');
        // The page may have changed size while the process started (or while detached).
        refit();
        send({ type: 'resize', rows: term.rows, cols: term.cols });
        l.observer.observe(el as HTMLDivElement);
        term.focus();
      };
      ws.onmessage = (m) => {
        if (live.current !== l || l.ws !== ws || typeof m.data !== 'string') return;
        let e: { type?: string; seq?: number; data?: string; from?: number; to?: number; error?: string };
        try {
          e = JSON.parse(m.data);
        } catch {
          return;
        }
        if ((e.type === 'stdout' || e.type === 'stderr') && typeof e.data === 'string') {
          l.seq = Math.max(l.seq, e.seq ?? 0);
          term.write(fromBase64(e.data));
        } else if (e.type === 'gap') {
          l.seq = Math.max(l.seq, e.to ?? 0);
          term.write(`\r\n\x1b[7m[output ${e.from}–${e.to} was dropped]\x1b[0m\r\n`);
        } else if (e.type === 'error') setError(e.error ?? 'refused');
        else if (e.type === 'end') {
          l.ended = true;
          const text = endText(e as { exit_code: number | null });
          term.write(`\r\n\x1b[7m[process ${text}]\x1b[0m\r\n`);
          setEnded(`The process ${text}.`);
          setState('ended');
        }
      };
      ws.onclose = (c) => {
        if (!opened) return neverAttached(c.reason || `the server refused (${c.code})`);
        if (live.current !== l || l.ws !== ws || l.ended) return;
        l.observer.disconnect();
        setState('detached');
        setEnded(`Disconnected${c.reason ? `: ${c.reason}` : ''}; the process is still running.`);
      };
    }
    attach(true);
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
        <ServicePicker services={services} service={service} onPick={setService} />
        <label>
          Command
          <input value={command} maxLength={1000} onInput={(e) => setCommand(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={!service || state === 'starting'}>
          {state === 'attached' || state === 'detached' ? 'Restart terminal' : 'Open terminal'}
        </button>
        {state === 'detached' && (
          <button type="button" onClick={() => live.current?.reattach()}>
            Re-attach
          </button>
        )}
        {(state === 'attached' || state === 'detached') && (
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
        {(state === 'ended' || state === 'detached') && ended}
      </p>
      <div ref={box} class={state === 'idle' ? 'term-box term-box-idle' : 'term-box'} />
    </section>
  );
}
