// The page's style nonce (the control plane puts a fresh one on the stylesheet's <link> and in
// the content security policy of every page it serves). xterm.js writes its theme and cell
// sizes into <style> elements it creates itself; `withStyleNonce` stamps the nonce on the ones
// created while `fn` runs (before they are inserted, which is when the browser checks it), so the
// policy can stay `style-src 'self'` plus that nonce instead of allowing any inline style.

function pageNonce(): string {
  const link = document.querySelector<HTMLLinkElement>('link[rel="stylesheet"]');
  return link?.nonce ?? '';
}

export function withStyleNonce<T>(fn: () => T): T {
  const nonce = pageNonce();
  if (!nonce) return fn();
  const original = document.createElement;
  const stamped = function (this: Document, tag: string, options?: ElementCreationOptions): HTMLElement {
    const el = original.call(this, tag, options);
    if (tag.toLowerCase() === 'style') el.setAttribute('nonce', nonce);
    return el;
  };
  document.createElement = stamped as typeof document.createElement;
  try {
    return fn();
  } finally {
    document.createElement = original;
  }
}
