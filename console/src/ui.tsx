// Small shared pieces of every page: loading data, showing errors and times, copying text.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';

export interface Loaded<T> {
  data: T | undefined;
  error: string;
  reload: () => void;
}

/** Runs `load` now and on `reload()`; a late answer to an older call is dropped. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState('');
  const seq = useRef(0);
  const fn = useRef(load);
  fn.current = load;
  const reload = useCallback(() => {
    const mine = ++seq.current;
    fn.current().then(
      (d) => {
        if (mine !== seq.current) return;
        setData(d);
        setError('');
      },
      (err: Error) => {
        if (mine === seq.current) setError(err.message);
      },
    );
  }, []);
  useEffect(() => {
    setData(undefined);
    reload();
  }, deps);
  return { data, error, reload };
}

/** A page: its heading (the one h1) and the document title. */
export function Page({ title, children }: { title: string; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · svc`;
  }, [title]);
  return (
    <>
      <h1>{title}</h1>
      {children}
    </>
  );
}

export function ErrorNote({ error }: { error: string }) {
  return error ? (
    <p role="alert" class="error">
      {error}
    </p>
  ) : null;
}

export function Loading({ what }: { what: string }) {
  return <p aria-busy="true">Loading {what}…</p>;
}

export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <span>—</span>;
  return <time dateTime={at}>{new Date(at).toLocaleString()}</time>;
}

/** "1.4 s", "320 ms", "2 min 5 s"; "running" while unfinished, "—" before start. */
export function duration(start: string | null, end: string | null): string {
  if (!start) return '—';
  if (!end) return 'running';
  const ms = Date.parse(end) - Date.parse(start);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** A status as text (never colour alone); the class only tints it. */
export function Status({ value }: { value: string }) {
  return <span class={`status status-${value.replace(/[^a-z_-]/g, '')}`}>{value}</span>;
}

/** Read-only text with a Copy button; `label` names both for assistive technology. */
export function CopyField({
  label,
  value,
  multiline,
}: {
  label: string;
  value: string;
  multiline?: boolean;
}) {
  const [copied, setCopied] = useState('');
  const id = useId();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('Copied to the clipboard.');
    } catch {
      setCopied('Copying failed: select the text and copy it.');
    }
  };
  return (
    <div class="copy">
      <div class="copy-text">
        <label for={id}>{label}</label>
        {multiline ? (
          <textarea id={id} readOnly rows={3} value={value} onFocus={(e) => e.currentTarget.select()} />
        ) : (
          <input id={id} readOnly value={value} onFocus={(e) => e.currentTarget.select()} />
        )}
      </div>
      <button type="button" onClick={copy} aria-label={`Copy ${label.toLowerCase()}`}>
        Copy
      </button>
      <span role="status">{copied}</span>
    </div>
  );
}

/** Evidence of a phase: a small definition list, nested values as JSON. */
export function Evidence({ value }: { value: Record<string, unknown> | null }) {
  if (!value || Object.keys(value).length === 0) return <span>—</span>;
  return (
    <dl class="evidence">
      {Object.entries(value).map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{typeof v === 'string' ? v : JSON.stringify(v)}</dd>
        </div>
      ))}
    </dl>
  );
}

/** A data table: its caption names it, `columns` are the header cells, children the rows. */
export function Table({
  caption,
  columns,
  children,
}: {
  caption: string;
  columns: string[];
  children: ComponentChildren;
}) {
  return (
    <table>
      <caption>{caption}</caption>
      <thead>
        <tr>
          {columns.map((c) => (
            <th scope="col" key={c}>
              {c}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  );
}

/** The options of a team picker: the name and the caller's role. */
export function TeamOptions({ teams }: { teams: { ID: string; Name: string; Role: string }[] }) {
  return (
    <>
      {teams.map((t) => (
        <option key={t.ID} value={t.ID}>
          {t.Name} ({t.Role})
        </option>
      ))}
    </>
  );
}

/** A user action's error message (cleared when it runs again) and the runner that records it. */
export function useAction(): [string, (fn: () => Promise<unknown>) => Promise<void>] {
  const [error, setError] = useState('');
  const attempt = useCallback(async (fn: () => Promise<unknown>) => {
    setError('');
    try {
      await fn();
    } catch (err) {
      setError((err as Error).message);
    }
  }, []);
  return [error, attempt];
}

/** The service a panel acts in: the first of the environment's services until the user picks one. */
export function useService(services: string[]): [string, (s: string) => void] {
  const [service, setService] = useState(services[0] ?? '');
  useEffect(() => {
    if (!service && services[0]) setService(services[0]);
  }, [services.join(' ')]);
  return [service, setService];
}

/** The labelled picker of a service among the environment's. */
export function ServicePicker({
  services,
  service,
  onPick,
}: {
  services: string[];
  service: string;
  onPick: (s: string) => void;
}) {
  return (
    <label>
      Service
      <select value={service} onChange={(e) => onPick(e.currentTarget.value)}>
        {services.map((s) => (
          <option key={s} value={s}>
            {s}
          </option>
        ))}
      </select>
    </label>
  );
}
