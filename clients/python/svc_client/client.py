"""Every route of the svc API as a method (service spec "Endpoints"). Request fields are the spec's lower
snake case; answers are returned as the server sends them (stored objects keep their capitalised field
names). Credentials and server follow the CLI's precedence: SVC_API_KEY, else the config file;
SVC_SERVER, else the file's server, else http://localhost:8080."""

import json
import os
import time

from .http import SvcError, Transport, quote
from .live import LiveMixin
from .routes import ROUTES, omit_none, route

DEFAULT_SERVER = "http://localhost:8080"
FINAL = ("succeeded", "failed", "rolled_back")


def config_file():
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "svc", "config.json")


def _saved():
    try:
        with open(config_file(), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


class Client(LiveMixin):
    def __init__(self, server=None, api_key=None, team=None, timeout=300.0):
        saved = {} if (api_key or os.environ.get("SVC_API_KEY")) and server else _saved()
        server = server or os.environ.get("SVC_SERVER") or saved.get("server") or DEFAULT_SERVER
        token = api_key or os.environ.get("SVC_API_KEY") or saved.get("api_key")
        self.http = Transport(server, token, team, timeout)

    @property
    def server(self):
        return self.http.server

    def _call(self, method, path, **kw):
        return self.http.request(method, path, **kw)

    # Health and releases
    @route("GET", "/health")
    def health(self):
        return self._call("GET", "/health", auth=False)

    @route("GET", "/install.sh")
    def install_script(self):
        return self._call("GET", "/install.sh", auth=False).decode()

    @route("GET", "/svcd")
    def download_svcd(self, arch="amd64"):
        return self._call("GET", "/svcd", query={"arch": arch}, auth=False)

    def download_svc(self, arch="amd64"):
        return self._call("GET", "/svc-linux-" + arch, auth=False)

    # Sign-in, teams and keys
    @route("GET", "/auth/codehost/start")
    def codehost_signin_url(self, return_to=None):
        """Where a browser starts code-host sign-in (the server answers it with a redirect)."""
        return self.http.url("/auth/codehost/start", {"return": return_to})

    @route("POST", "/auth/dev-login")
    def dev_login(self, email, name=None):
        return self._call("POST", "/auth/dev-login", body=omit_none(email=email, name=name), auth=False)

    @route("POST", "/v1/device/code")
    def device_code(self):
        return self._call("POST", "/v1/device/code", body={}, auth=False)

    @route("POST", "/v1/device/approve")
    def device_approve(self, user_code, team_id, name=None):
        return self._call("POST", "/v1/device/approve", body=omit_none(user_code=user_code, team_id=team_id, name=name))

    @route("POST", "/v1/device/token")
    def device_token(self, device_code):
        return self._call("POST", "/v1/device/token", body={"device_code": device_code}, auth=False)

    @route("GET", "/v1/me")
    def me(self):
        return self._call("GET", "/v1/me")

    @route("GET", "/v1/teams")
    def teams(self):
        return self._call("GET", "/v1/teams")["teams"]

    @route("POST", "/v1/teams")
    def create_team(self, name):
        return self._call("POST", "/v1/teams", body={"name": name})["team"]

    @route("GET", "/v1/keys")
    def keys(self):
        return self._call("GET", "/v1/keys")["keys"]

    @route("POST", "/v1/keys")
    def create_key(self, name=None):
        return self._call("POST", "/v1/keys", body=omit_none(name=name))

    @route("DELETE", "/v1/keys/{id}")
    def revoke_key(self, key_id):
        return self._call("DELETE", "/v1/keys/" + quote(key_id))

    # Projects
    @route("GET", "/v1/templates")
    def templates(self, kind=None):
        return self._call("GET", "/v1/templates", query={"kind": kind})

    @route("GET", "/v1/projects")
    def projects(self):
        return self._call("GET", "/v1/projects")["projects"]

    @route("POST", "/v1/projects")
    def create_project(self, name, kind=None, source=None):
        return self._call("POST", "/v1/projects", body=omit_none(name=name, kind=kind, source=source))

    @route("PUT", "/v1/uploads")
    def upload_context(self, archive):
        """A project context (tar or tar.gz bytes, at most 512 MiB): {upload, sha256, bytes} for deploy(context=)."""
        return self._call("PUT", "/v1/uploads", raw=archive, content_type="application/x-tar", timeout=600)

    @route("GET", "/v1/projects/{project}/envs")
    def project_envs(self, project):
        return self._call("GET", "/v1/projects/%s/envs" % quote(project))["environments"]

    @route("POST", "/v1/projects/{project}/deploy")
    def deploy(self, project, compose, env=None, warm=None, context=None, compose_path=None, **extra):
        """context: an upload id from upload_context(); compose_path: the compose file's place inside it."""
        body = omit_none(compose=compose, env=env, warm=warm, context=context, compose_path=compose_path, **extra)
        return self._call("POST", "/v1/projects/%s/deploy" % quote(project), body=body)

    @route("GET", "/v1/projects/{project}/source")
    def project_source(self, project):
        return self._call("GET", "/v1/projects/%s/source" % quote(project))["source"]

    @route("POST", "/v1/projects/{project}/source")
    def set_project_source(self, project, **fields):
        return self._call("POST", "/v1/projects/%s/source" % quote(project), body=fields)["source"]

    @route("POST", "/v1/projects/{project}/deploy-from-source")
    def deploy_from_source(self, project, branch=None, env=None):
        path = "/v1/projects/%s/deploy-from-source" % quote(project)
        return self._call("POST", path, body=omit_none(branch=branch, env=env))

    # Environments
    @route("GET", "/v1/envs/{env}")
    def env(self, env_id):
        return self._call("GET", "/v1/envs/" + quote(env_id))

    @route("GET", "/v1/envs/{env}/versions")
    def env_versions(self, env_id):
        return self._call("GET", "/v1/envs/%s/versions" % quote(env_id))["versions"]

    @route("GET", "/v1/envs/{env}/deployments")
    def env_deployments(self, env_id):
        return self._call("GET", "/v1/envs/%s/deployments" % quote(env_id))["deployments"]

    @route("GET", "/v1/envs/{env}/lineage")
    def env_lineage(self, env_id):
        """What the environment was forked from, nearest first: [{environment, version}], at most 8."""
        return self._call("GET", "/v1/envs/%s/lineage" % quote(env_id))["ancestors"]

    @route("POST", "/v1/envs/{env}/fork")
    def fork(self, env_id, name=None, version=None, count=None):
        """count (1-100): that many forks of the one snapshot, named <name>-1 ... <name>-<count>; the
        answer is {fanout, version, snapshot, forks: [{environment, deployment, phases} or {name, error, status}]}."""
        body = omit_none(name=name, version=version, count=count)
        return self._call("POST", "/v1/envs/%s/fork" % quote(env_id), body=body)

    @route("POST", "/v1/envs/{env}/snapshot")
    def snapshot(self, env_id):
        return self._call("POST", "/v1/envs/%s/snapshot" % quote(env_id), body={})

    @route("POST", "/v1/envs/{env}/rollback")
    def rollback(self, env_id, version):
        return self._call("POST", "/v1/envs/%s/rollback" % quote(env_id), body={"version": version})

    @route("POST", "/v1/envs/{env}/verify")
    def verify(self, env_id, resume=None, step=None):
        """step: a step of a multi-step task (x-svc.verifier.steps) to grade with its own tests."""
        body = omit_none(resume=resume, step=step)
        return self._call("POST", "/v1/envs/%s/verify" % quote(env_id), body=body)

    @route("POST", "/v1/envs/{env}/exec")
    def exec(self, env_id, service, cmd, timeout_sec=None):
        body = omit_none(service=service, cmd=list(cmd), timeout_sec=timeout_sec)
        timeout = (timeout_sec or 120) + 30
        return self._call("POST", "/v1/envs/%s/exec" % quote(env_id), body=body, timeout=timeout)

    @route("PUT", "/v1/envs/{env}/files")
    def put_archive(self, env_id, service, path, tar_bytes):
        query = {"service": service, "path": path}
        return self._call(
            "PUT", "/v1/envs/%s/files" % quote(env_id), query=query, raw=tar_bytes, content_type="application/x-tar"
        )

    @route("GET", "/v1/envs/{env}/files")
    def get_archive(self, env_id, service, path):
        return self._call("GET", "/v1/envs/%s/files" % quote(env_id), query={"service": service, "path": path})

    @route("DELETE", "/v1/envs/{env}")
    def destroy(self, env_id):
        return self._call("DELETE", "/v1/envs/" + quote(env_id))

    # Deployments and sandboxes
    @route("GET", "/v1/deployments/{dep}")
    def deployment(self, dep_id):
        return self._call("GET", "/v1/deployments/" + quote(dep_id))

    def wait(self, dep_id, timeout=900.0, poll=0.5):
        """Polls a deployment until it has finished (a non-null FinishedAt or a final status).

        The first poll comes after 50 ms and each wait doubles up to `poll` seconds: snapshots and
        forks end in well under a second."""
        deadline = time.monotonic() + timeout
        delay = min(0.05, poll)
        while True:
            got = self.deployment(dep_id)
            d = got["deployment"]
            if d.get("FinishedAt") or d.get("Status") in FINAL:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError("deployment %s did not finish in %.0f s" % (dep_id, timeout))
            time.sleep(delay)
            delay = min(delay * 2, poll)

    @route("POST", "/v1/versions/{ver}/pool")
    def set_pool(self, version, size):
        """Keep `size` healthy forks of a version ready; sandboxes from it then claim one."""
        return self._call("POST", "/v1/versions/%s/pool" % quote(version), body={"size": size})["pool"]

    @route("GET", "/v1/versions/{ver}/pool")
    def pool(self, version):
        return self._call("GET", "/v1/versions/%s/pool" % quote(version))["pool"]

    @route("DELETE", "/v1/versions/{ver}/pool")
    def delete_pool(self, version):
        return self._call("DELETE", "/v1/versions/%s/pool" % quote(version))["pool"]

    @route("POST", "/v1/sandboxes")
    def sandbox(self, from_version=None, image=None, **fields):
        """count=N (1-100, with from_version) starts N forks of its one snapshot at once; the answer is
        {fanout, version, snapshot, sandboxes: [{environment, deployment} or {name, error, status, ...}]}."""
        body = omit_none(from_version=from_version, image=image, **fields)
        return self._call("POST", "/v1/sandboxes", body=body, timeout=(fields.get("timeout_sec") or 600) + 60)

    @route("POST", "/v1/targets/{name}/sandboxes")
    def target_sandbox(self, target, image, **fields):
        path = "/v1/targets/%s/sandboxes" % quote(target)
        return self._call("POST", path, body=omit_none(image=image, **fields), timeout=(fields.get("timeout_sec") or 600) + 60)

    # Clouds, hosts and targets
    @route("GET", "/v1/clouds")
    def clouds(self):
        return self._call("GET", "/v1/clouds")["clouds"]

    @route("POST", "/v1/clouds")
    def create_cloud(self, provider, name=None, config=None):
        return self._call("POST", "/v1/clouds", body=omit_none(provider=provider, name=name, config=config))["cloud"]

    @route("POST", "/v1/join-tokens")
    def join_token(self, cloud_id=None):
        return self._call("POST", "/v1/join-tokens", body=omit_none(cloud_id=cloud_id))

    @route("GET", "/v1/hosts")
    def hosts(self):
        return self._call("GET", "/v1/hosts")["hosts"]

    @route("POST", "/v1/targets/connect")
    def connect_target(self, provider, token=None, name=None, config=None):
        """A hosted sandbox provider (sandbox-a, sandbox-b): the token is checked, then cloud and driver host made."""
        return self._call("POST", "/v1/targets/connect", body=omit_none(provider=provider, token=token, name=name, config=config))

    @route("GET", "/v1/targets")
    def targets(self):
        return self._call("GET", "/v1/targets")["targets"]

    # Code-hosting integration
    @route("GET", "/v1/codehost/installations")
    def codehost_installations(self):
        return self._call("GET", "/v1/codehost/installations")

    @route("POST", "/v1/codehost/installations/{id}/link")
    def link_installation(self, installation_id):
        return self._call("POST", "/v1/codehost/installations/%s/link" % quote(installation_id), body={})

    @route("GET", "/v1/codehost/repos")
    def codehost_repos(self, installation_id):
        return self._call("GET", "/v1/codehost/repos", query={"installation": installation_id})["repos"]

    # Events
    @route("GET", "/v1/events")
    def events(self, subject):
        return self._call("GET", "/v1/events", query={"subject": subject})["events"]

    @route("GET", "/v1/events/stream")
    def stream_events(self, subject=None, last_event_id=None, timeout=None):
        """Yields the team's events as they happen (Server-Sent Events), resuming after last_event_id."""
        import json as _json
        import urllib.request as _rq

        headers = {"Accept": "text/event-stream", "Authorization": "Bearer " + (self.http.token or "")}
        if self.http.team:
            headers["X-Svc-Team"] = self.http.team
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        req = _rq.Request(self.http.url("/v1/events/stream", {"subject": subject}), headers=headers)
        try:
            res = _rq.urlopen(req, timeout=timeout or self.http.timeout)
        except Exception as err:  # an HTTPError carries the server's {error}
            if hasattr(err, "code"):
                raise SvcError(err.code, err.read().decode("utf-8", "replace"), "GET", "/v1/events/stream") from None
            raise
        with res:
            data = []
            for raw in res:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif line == "" and data:
                    yield _json.loads("\n".join(data))
                    data = []

    def episode(self, from_version=None, image=None, service=None, **sandbox_fields):
        """A sandbox for one episode: `with client.episode(from_version=...) as ep: ...`."""
        from .episode import Episode

        return Episode(self, from_version=from_version, image=image, service=service, **sandbox_fields)


for _method, _path in [("GET", "/svc-linux-amd64"), ("GET", "/svc-linux-arm64")]:
    ROUTES[(_method, _path)] = "download_svc"
for _arch in ("amd64", "arm64"):
    ROUTES[("GET", "/svcd-linux-" + _arch)] = "download_svcd"

# Routes a client never calls: the code host's own callers, not users.
NOT_CLIENT_ROUTES = {
    ("GET", "/auth/codehost/callback"): "the code host's redirect target after sign-in",
    ("POST", "/webhooks/codehost"): "called by the code host with a signed delivery",
    ("GET", "/v1/hosts/stream"): "the sidecars' WebSocket",
    ("GET", "/openapi.json"): "the API description itself",
}

__all__ = ["Client", "SvcError", "ROUTES", "NOT_CLIENT_ROUTES"]
