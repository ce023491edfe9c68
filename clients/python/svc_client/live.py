"""Live processes and single-file operations: the /processes and /fs routes. Output and watch
events arrive as Server-Sent Events, read with the standard library; input goes by POST."""

import base64
import json
import urllib.request

from .http import SvcError, quote
from .routes import omit_none, route


class LiveMixin:
    def _sse(self, path, query, timeout=None):
        """Yields each event's JSON object; the server ends the stream after a process's `end`."""
        headers = {"Accept": "text/event-stream", "Authorization": "Bearer " + (self.http.token or "")}
        if self.http.team:
            headers["X-Svc-Team"] = self.http.team
        req = urllib.request.Request(self.http.url(path, query), headers=headers)
        try:
            res = urllib.request.urlopen(req, timeout=timeout or self.http.timeout)
        except Exception as err:  # an HTTPError carries the server's {error}
            if hasattr(err, "code"):
                raise SvcError(err.code, err.read().decode("utf-8", "replace"), "GET", path) from None
            raise
        with res:
            data = []
            for raw in res:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif line == "" and data:
                    event = json.loads("\n".join(data))
                    data = []
                    yield event
                    if event.get("type") == "end":
                        return

    # Processes
    @route("POST", "/v1/envs/{env}/processes")
    def process_start(self, env_id, service, cmd, env=None, cwd=None, user=None, stdin=None, tty=None):
        """tty: {"rows": R, "cols": C}. Returns {"pid": ...} at once; the process runs on."""
        body = omit_none(service=service, cmd=list(cmd), env=env, cwd=cwd, user=user, stdin=stdin, tty=tty)
        return self._call("POST", "/v1/envs/%s/processes" % quote(env_id), body=body)

    @route("GET", "/v1/envs/{env}/processes")
    def processes(self, env_id):
        return self._call("GET", "/v1/envs/%s/processes" % quote(env_id))["processes"]

    @route("GET", "/v1/envs/{env}/processes/{pid}")
    def process(self, env_id, pid):
        return self._call("GET", "/v1/envs/%s/processes/%s" % (quote(env_id), quote(pid)))

    @route("GET", "/v1/envs/{env}/processes/{pid}/stream")
    def process_attach(self, env_id, pid, since=None, timeout=None):
        """Yields {type: stdout|stderr, seq, data (bytes)}, {type: gap, from, to} and last {type: end, ...}."""
        path = "/v1/envs/%s/processes/%s/stream" % (quote(env_id), quote(pid))
        for event in self._sse(path, {"since": since}, timeout):
            if event.get("type") in ("stdout", "stderr"):
                event["data"] = base64.b64decode(event.get("data", ""))
            yield event

    @route("POST", "/v1/envs/{env}/processes/{pid}/input")
    def process_input(self, env_id, pid, data=None, close=False):
        """data: bytes or str for the process's stdin; close=True closes it (not a terminal's: send b"\\x04")."""
        if isinstance(data, str):
            data = data.encode()
        body = {"close": True} if close else {"data": base64.b64encode(data or b"").decode()}
        path = "/v1/envs/%s/processes/%s/input" % (quote(env_id), quote(pid))
        return self._call("POST", path, body=body)

    @route("POST", "/v1/envs/{env}/processes/{pid}/signal")
    def process_kill(self, env_id, pid, signal="TERM"):
        path = "/v1/envs/%s/processes/%s/signal" % (quote(env_id), quote(pid))
        return self._call("POST", path, body={"signal": signal})

    # Files
    def _fs(self, env_id, suffix=""):
        return "/v1/envs/%s/fs%s" % (quote(env_id), suffix)

    @route("GET", "/v1/envs/{env}/fs")
    def fs_read(self, env_id, service, path):
        return self._call("GET", self._fs(env_id), query={"service": service, "path": path})

    @route("PUT", "/v1/envs/{env}/fs")
    def fs_write(self, env_id, service, path, data, mode=None):
        if isinstance(data, str):
            data = data.encode()
        query = omit_none(service=service, path=path, mode=mode)
        return self._call("PUT", self._fs(env_id), query=query, raw=data, content_type="application/octet-stream")

    @route("DELETE", "/v1/envs/{env}/fs")
    def fs_remove(self, env_id, service, path):
        return self._call("DELETE", self._fs(env_id), query={"service": service, "path": path})

    @route("GET", "/v1/envs/{env}/fs/stat")
    def fs_stat(self, env_id, service, path):
        return self._call("GET", self._fs(env_id, "/stat"), query={"service": service, "path": path})

    @route("GET", "/v1/envs/{env}/fs/list")
    def fs_list(self, env_id, service, path, depth=None):
        query = omit_none(service=service, path=path, depth=depth)
        return self._call("GET", self._fs(env_id, "/list"), query=query)["entries"]

    @route("POST", "/v1/envs/{env}/fs/move")
    def fs_move(self, env_id, service, src, dst):
        return self._call("POST", self._fs(env_id, "/move"), body={"service": service, "from": src, "to": dst})

    @route("POST", "/v1/envs/{env}/fs/mkdir")
    def fs_mkdir(self, env_id, service, path):
        return self._call("POST", self._fs(env_id, "/mkdir"), body={"service": service, "path": path})

    @route("GET", "/v1/envs/{env}/fs/watch")
    def fs_watch(self, env_id, service, path, timeout=None):
        """Yields {type: create|write|remove|rename|gap|end, path, ...} as the directory changes."""
        return self._sse(self._fs(env_id, "/watch"), {"service": service, "path": path}, timeout)
