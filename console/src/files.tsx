// A file browser for a service of an environment, over the file API: list a directory
// (GET /v1/envs/{env}/fs/list) and move through it, open a text file (at most VIEW_LIMIT bytes are
// read and shown; a binary file says so), download a file (its bytes through the session, saved
// from a blob: URL), and upload one into the directory shown (PUT /v1/envs/{env}/fs).
import { useEffect, useId, useState } from 'preact/hooks';
import { ApiError, api, authHeaders, type FsEntry } from './api.ts';
import { ErrorNote, ServicePicker, Table, useService, When } from './ui.tsx';

/** The most of a file the page reads to show it. */
export const VIEW_LIMIT = 256 * 1024;

interface Opened {
  path: string;
  size: number;
  text?: string;
  note?: string;
}

const fsUrl = (envId: string, service: string, path: string) =>
  `/v1/envs/${encodeURIComponent(envId)}/fs?${new URLSearchParams({ service, path })}`;

async function failure(r: Response): Promise<ApiError> {
  let message = `${r.status} ${r.statusText}`;
  try {
    const body = (await r.json()) as { error?: string };
    if (body.error) message = body.error;
  } catch {}
  return new ApiError(r.status, message);
}

/** At most `limit` bytes of a file; the read stops there. */
async function readHead(envId: string, service: string, path: string, limit: number): Promise<Uint8Array> {
  const r = await fetch(fsUrl(envId, service, path), {
    headers: authHeaders(),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (!r.ok || !r.body) throw await failure(r);
  const reader = r.body.getReader();
  const parts: Uint8Array[] = [];
  let got = 0;
  while (got < limit) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    got += value.length;
  }
  await reader.cancel().catch(() => {});
  const out = new Uint8Array(Math.min(got, limit));
  let at = 0;
  for (const p of parts) {
    const n = Math.min(p.length, out.length - at);
    out.set(p.subarray(0, n), at);
    at += n;
  }
  return out;
}

/** The text of `bytes`, or undefined for a binary file (a NUL byte, or not UTF-8 but a cut last character). */
function asText(bytes: Uint8Array, whole: boolean): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: !whole });
  } catch {
    return undefined;
  }
}

const join = (dir: string, name: string) => (dir.endsWith('/') ? dir + name : `${dir}/${name}`);
function parent(dir: string): string {
  const d = dir.length > 1 && dir.endsWith('/') ? dir.slice(0, -1) : dir;
  return d.slice(0, d.lastIndexOf('/')) || '/';
}

export function FilesPanel({ envId, services }: { envId: string; services: string[] }) {
  const [service, setService] = useService(services);
  const [dir, setDir] = useState('/');
  const [typed, setTyped] = useState('/');
  const [entries, setEntries] = useState<FsEntry[] | null>(null);
  const [truncated, setTruncated] = useState(false);
  const [opened, setOpened] = useState<Opened | null>(null);
  const [upload, setUpload] = useState<File | null>(null);
  const [note, setNote] = useState('');
  const [error, setError] = useState('');
  const ids = useId();

  const attempt = async (fn: () => Promise<void>) => {
    setError('');
    try {
      await fn();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const list = (path: string) =>
    attempt(async () => {
      if (!service) return;
      const r = await api.listDir(envId, service, path);
      setDir(path);
      setTyped(path);
      setEntries(
        [...r.entries].sort(
          (a, b) => Number(b.type === 'dir') - Number(a.type === 'dir') || a.name.localeCompare(b.name),
        ),
      );
      setTruncated(r.truncated);
    });
  useEffect(() => {
    setEntries(null);
    setOpened(null);
    if (service) void list(dir);
  }, [service, envId]);

  const open = (e: FsEntry) =>
    attempt(async () => {
      setOpened(null);
      const bytes = await readHead(envId, service, e.path, VIEW_LIMIT);
      const whole = bytes.length >= e.size;
      const text = asText(bytes, whole);
      if (text === undefined) setOpened({ path: e.path, size: e.size, note: 'a binary file: download it.' });
      else
        setOpened({
          path: e.path,
          size: e.size,
          text,
          ...(whole ? {} : { note: `the first ${bytes.length} bytes; download it for the rest.` }),
        });
    });

  const download = (e: FsEntry) =>
    attempt(async () => {
      const r = await fetch(fsUrl(envId, service, e.path), {
        headers: authHeaders(),
        credentials: 'omit',
        cache: 'no-store',
      });
      if (!r.ok) throw await failure(r);
      const url = URL.createObjectURL(await r.blob());
      try {
        const a = document.createElement('a');
        a.href = url;
        a.download = e.name;
        a.click();
      } finally {
        setTimeout(() => URL.revokeObjectURL(url), 60_000);
      }
    });

  const send = () =>
    attempt(async () => {
      if (!upload) return;
      const path = join(dir, upload.name);
      const r = await fetch(fsUrl(envId, service, path), {
        method: 'PUT',
        headers: { ...authHeaders(), 'content-type': 'application/octet-stream' },
        body: upload,
        credentials: 'omit',
        cache: 'no-store',
      });
      if (r.status !== 201) throw await failure(r);
      const written = (await r.json()) as { path: string; size: number };
      setNote(`Uploaded ${written.path} (${written.size} bytes).`);
      await list(dir);
    });

  return (
    <section aria-labelledby={`${ids}-h`}>
      <h2 id={`${ids}-h`}>Files</h2>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          void list(typed.trim() || '/');
        }}
      >
        <ServicePicker services={services} service={service} onPick={setService} />
        <label>
          Directory
          <input value={typed} maxLength={4096} onInput={(e) => setTyped(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={!service}>
          List
        </button>
        <button type="button" disabled={!service || dir === '/'} onClick={() => void list(parent(dir))}>
          Parent directory
        </button>
      </form>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <label>
          Upload a file to {dir}
          <input type="file" onChange={(e) => setUpload(e.currentTarget.files?.[0] ?? null)} />
        </label>
        <button type="submit" disabled={!upload || !service}>
          Upload
        </button>
      </form>
      <ErrorNote error={error} />
      <p role="status">{note}</p>
      {entries && (
        <Table
          caption={`${service}: ${dir}${truncated ? ' (the first entries only)' : ''}`}
          columns={['Name', 'Type', 'Size', 'Modified', 'Actions']}
        >
          {entries.map((e) => (
            <tr key={e.path}>
              <th scope="row">
                {e.type === 'dir' ? (
                  <button type="button" class="link" onClick={() => void list(e.path)}>
                    {e.name}/
                  </button>
                ) : (
                  e.name
                )}
              </th>
              <td>{e.type}</td>
              <td>{e.type === 'dir' ? '—' : e.size}</td>
              <td>
                <When at={e.mtime} />
              </td>
              <td>
                {e.type === 'file' && (
                  <>
                    <button type="button" onClick={() => void open(e)} aria-label={`Open ${e.name}`}>
                      Open
                    </button>
                    <button type="button" onClick={() => void download(e)} aria-label={`Download ${e.name}`}>
                      Download
                    </button>
                  </>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {opened && (
        <figure class="file">
          <figcaption>
            {opened.path} ({opened.size} bytes){opened.note ? `: ${opened.note}` : ''}
          </figcaption>
          {opened.text !== undefined && <pre>{opened.text}</pre>}
        </figure>
      )}
    </section>
  );
}
