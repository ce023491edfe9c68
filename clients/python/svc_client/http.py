"""One HTTP round trip with urllib: JSON or raw bodies, bearer auth, a timeout on every request, and
every non-2xx answer raised as SvcError(status, message) from the server's {error} body."""

import json
import urllib.error
import urllib.parse
import urllib.request


class SvcError(Exception):
    """An answer of 4xx or 5xx: `status` is the HTTP status, `message` the server's `error` text."""

    def __init__(self, status, message, method="", path=""):
        super().__init__("%s %s: %d %s" % (method, path, status, message))
        self.status = status
        self.message = message


class Transport:
    def __init__(self, server, token=None, team=None, timeout=300.0):
        self.server = server.rstrip("/")
        self.token = token
        self.team = team
        self.timeout = timeout

    def url(self, path, query=None):
        q = {k: v for k, v in (query or {}).items() if v is not None}
        return self.server + path + ("?" + urllib.parse.urlencode(q) if q else "")

    def request(self, method, path, body=None, query=None, raw=None, content_type=None, auth=True, timeout=None):
        """JSON `body` or bytes `raw`; returns parsed JSON, or bytes when the answer is not JSON."""
        headers = {"Accept": "application/json"}
        data = None
        if raw is not None:
            data = raw
            headers["Content-Type"] = content_type or "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth and self.token:
            headers["Authorization"] = "Bearer " + self.token
        if auth and self.team:
            headers["X-Svc-Team"] = self.team
        req = urllib.request.Request(self.url(path, query), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as res:
                payload = res.read()
                kind = res.headers.get("Content-Type", "")
        except urllib.error.HTTPError as err:
            text = err.read().decode("utf-8", "replace")
            try:
                message = json.loads(text).get("error", text)
            except ValueError:
                message = text or err.reason
            raise SvcError(err.code, message, method, path) from None
        if kind.startswith("application/json"):
            return json.loads(payload) if payload else None
        return payload


def quote(segment):
    """A path segment: ids and names never carry a slash into the route."""
    return urllib.parse.quote(str(segment), safe="")
