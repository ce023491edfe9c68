// The device-flow verification page the control plane serves itself when no console is configured
// (SVC_CONSOLE_URL unset). It approves a CLI login with a user session: paste the session token,
// pick a team, approve. The page is static; the code comes from the query and is only ever set as
// an input's value, never written into the HTML.

export const DEVICE_PAGE_PATH = '/device';

export const DEVICE_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Approve CLI sign-in</title>
<style>
 body { font: 15px/1.5 system-ui, sans-serif; max-width: 34rem; margin: 3rem auto; padding: 0 1rem; }
 label { display: block; margin-top: 1rem; font-weight: 600; }
 input, select, button { font: inherit; width: 100%; padding: .4rem; box-sizing: border-box; }
 button { margin-top: 1.2rem; cursor: pointer; }
 code { background: #f2f2f2; padding: 0 .25rem; }
 #out { margin-top: 1.2rem; white-space: pre-wrap; }
</style>
</head>
<body>
<h1>Approve a CLI sign-in</h1>
<p>The <code>svc login</code> command printed a code. Approving it creates an API key for the team
you choose and hands it to that CLI once.</p>
<p>You need a user session token (<code>dst_…</code>): from the console, from code-hosting sign-in
at <code>/auth/codehost/start</code>, or, on a local server with <code>SVC_DEV_LOGIN=1</code>, from
<code>POST /auth/dev-login</code>.</p>
<form id="f">
 <label for="code">Code</label>
 <input id="code" name="code" autocomplete="off" placeholder="XXXX-XXXX" required>
 <label for="session">Session token</label>
 <input id="session" name="session" type="password" autocomplete="off" placeholder="dst_…" required>
 <label for="team">Team</label>
 <select id="team" name="team"><option value="">(load your teams first)</option></select>
 <button type="button" id="load">Load my teams</button>
 <button type="submit">Approve</button>
</form>
<div id="out" role="status"></div>
<script>
const $ = (id) => document.getElementById(id);
$('code').value = new URLSearchParams(location.search).get('code') || '';
const auth = () => ({ authorization: 'Bearer ' + $('session').value.trim(), 'content-type': 'application/json' });
const say = (text) => { $('out').textContent = text; };
$('load').onclick = async () => {
  const r = await fetch('/v1/me', { headers: auth() });
  const body = await r.json();
  if (!r.ok) return say(body.error || r.statusText);
  $('team').replaceChildren(...body.teams.map((t) => new Option(t.Name + ' (' + t.Role + ')', t.ID)));
};
$('f').onsubmit = async (e) => {
  e.preventDefault();
  const body = JSON.stringify({ user_code: $('code').value.trim(), team_id: $('team').value });
  const r = await fetch('/v1/device/approve', { method: 'POST', headers: auth(), body });
  const out = await r.json();
  say(r.ok ? 'Approved. Return to your terminal.' : out.error || r.statusText);
};
</script>
</body>
</html>
`;
