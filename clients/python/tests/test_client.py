"""The Python client against a real control plane (a fake sidecar is its host), started by
test/clients/python.test.ts, which passes SVC_SERVER and SVC_API_KEY."""

import json
import os
import threading
import unittest
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from svc_client import Client, SvcError
from svc_client.client import NOT_CLIENT_ROUTES, ROUTES

COMPOSE = """services:
  main:
    image: busybox
    user: "1000:1000"
    command: ["sleep", "infinity"]
    volumes: [work:/work]
volumes:
  work: {}
x-svc.agent.service: main
x-svc.verifier:
  image: busybox
  command: ["sh", "-c", "echo 1 > /logs/verifier/reward.txt"]
  collect: ["/work"]
  timeout_sec: 60
"""

_lock = threading.Lock()
_version = {}


def healthy_version(client):
    """One deployed, healthy version shared by the tests (deployed once)."""
    with _lock:
        if "id" not in _version:
            client.create_project("py-episodes")
            started = client.deploy("py-episodes", COMPOSE)
            done = client.wait(started["deployment"]["ID"], timeout=120)
            assert done["deployment"]["Status"] == "succeeded", done
            _version["id"] = done["deployment"]["VersionID"]
            _version["env"] = done["deployment"]["EnvID"]
        return _version["id"], _version["env"]


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.c = Client()

    def test_every_api_route_is_a_method(self):
        with urllib.request.urlopen(self.c.server + "/openapi.json", timeout=30) as res:
            doc = json.load(res)
        missing = []
        for path, ops in doc["paths"].items():
            for method in ops:
                key = (method.upper(), path)
                if key in NOT_CLIENT_ROUTES:
                    continue
                name = ROUTES.get(key)
                if not name or not callable(getattr(Client, name, None)):
                    missing.append("%s %s" % key)
        self.assertEqual(missing, [], "routes without a client method")

    def test_errors_are_typed_with_status_and_message(self):
        with self.assertRaises(SvcError) as bad_key:
            Client(server=self.c.server, api_key="dak_" + "0" * 40).me()
        self.assertEqual(bad_key.exception.status, 401)
        with self.assertRaises(SvcError) as missing:
            self.c.env("env_doesnotexist")
        self.assertEqual(missing.exception.status, 404)
        self.assertIn("env_doesnotexist", str(missing.exception) + missing.exception.message)
        with self.assertRaises(SvcError) as refused:
            self.c.deploy("py-errors-none", "services: {}\n")
        self.assertIn(refused.exception.status, (400, 404))

    def test_accounts_projects_and_infrastructure(self):
        self.assertEqual(self.c.health(), {"status": "ok"})
        team = self.c.me()["team"]
        self.assertTrue(team["ID"].startswith("team_") or team["ID"])
        session = self.c.dev_login("py@example.com", name="Py")["token"]
        user = Client(server=self.c.server, api_key=session)
        created = user.create_team("py-team")
        self.assertIn(created["ID"], [t["ID"] for t in user.teams()])
        minted = self.c.create_key("py-key")
        self.assertTrue(minted["api_key"].startswith("dak_"))
        self.assertIn(minted["key"]["ID"], [k["ID"] for k in self.c.keys()])
        self.assertEqual(self.c.revoke_key(minted["key"]["ID"]), {"revoked": True})
        with self.assertRaises(SvcError) as revoked:
            Client(server=self.c.server, api_key=minted["api_key"]).me()
        self.assertEqual(revoked.exception.status, 401)
        made = self.c.create_project("py-project", kind="agent")
        self.assertEqual([e["Name"] for e in made["environments"]], ["alpha"])
        self.assertIn("py-project", [p["Name"] for p in self.c.projects()])
        self.assertEqual(self.c.project_envs("py-project")[0]["Name"], "alpha")
        self.assertIn("rl-environment-ops", [t["name"] for t in self.c.templates()["templates"]])
        self.assertTrue(self.c.hosts()[0]["connected"])
        self.assertEqual(self.c.targets()[0]["kind"], "sidecar")
        self.assertEqual(self.c.create_cloud("manual", name="py-manual")["Provider"], "manual")
        self.assertIn("py-manual", [c["Name"] for c in self.c.clouds()])
        self.assertTrue(self.c.join_token()["token"].startswith("djt_"))
        self.assertTrue(self.c.install_script().startswith("#!/bin/sh"))

    def test_lifecycle_and_events(self):
        version, env = healthy_version(self.c)
        snap = self.c.wait(self.c.snapshot(env)["deployment"]["ID"])
        self.assertEqual(snap["deployment"]["Status"], "succeeded")
        back = self.c.wait(self.c.rollback(env, version)["deployment"]["ID"])
        self.assertEqual(back["deployment"]["Status"], "succeeded")
        fork = self.c.wait(self.c.fork(env, name="py-fork")["deployment"]["ID"])
        self.assertEqual(fork["deployment"]["Status"], "succeeded")
        self.assertGreaterEqual(len(self.c.env_versions(env)), 2)
        self.assertGreaterEqual(len(self.c.env_deployments(env)), 3)
        lineage = self.c.env_lineage(fork["deployment"]["EnvID"])
        self.assertEqual([a["environment"]["ID"] for a in lineage], [env])
        self.assertEqual(self.c.env_lineage(env), [])
        evs = self.c.events("env:" + env)
        self.assertIn("deployment.finished", [e["Kind"] for e in evs])
        # The live stream resumes after a given event: the next one comes at once.
        streamed = self.c.stream_events(subject="env:" + env, last_event_id=evs[-1]["ID"], timeout=30)
        self.assertEqual(next(streamed)["ID"], evs[-2]["ID"])
        streamed.close()
        gone = self.c.wait(self.c.destroy(fork["deployment"]["EnvID"])["deployment"]["ID"])
        self.assertEqual(gone["deployment"]["Status"], "succeeded")

    def test_fan_out_forks_and_sandboxes(self):
        version, env = healthy_version(self.c)
        fan = self.c.fork(env, name="py-fan", count=2)
        self.assertEqual([f["environment"]["Name"] for f in fan["forks"]], ["py-fan-1", "py-fan-2"])
        for f in fan["forks"]:
            self.assertEqual(self.c.wait(f["deployment"]["ID"])["deployment"]["Status"], "succeeded")
        sbx = self.c.sandbox(from_version=version, count=2, name="py-sbx")
        self.assertEqual(sbx["snapshot"], fan["snapshot"])
        self.assertEqual([s["environment"]["Status"] for s in sbx["sandboxes"]], ["running", "running"])
        with self.assertRaises(SvcError) as over:
            self.c.fork(env, count=101)
        self.assertEqual(over.exception.status, 400)

    def test_an_episode_acquires_execs_moves_files_verifies_and_releases(self):
        version, _ = healthy_version(self.c)
        with self.c.episode(from_version=version) as ep:
            env = ep.env_id
            self.assertEqual(self.c.env(env)["environment"]["Stage"], "fork")
            self.assertEqual(ep.exec(["echo", "hi"])["stdout"], "echo hi\n")
            ep.put_file("/work/answer.txt", "71\n")
            self.assertEqual(ep.get_file("/work/answer.txt"), b"71\n")
            self.assertEqual(ep.verify(), 1)
            # step= reaches the server: this verifier has no steps to name.
            with self.assertRaises(SvcError) as no_steps:
                ep.verify(step="scaffold")
            self.assertEqual(no_steps.exception.status, 400)
            self.assertIn("unknown step 'scaffold'", str(no_steps.exception) + no_steps.exception.message)
        status = self.c.env(env)["environment"]["Status"]
        deps = self.c.env_deployments(env)
        self.assertEqual(deps[0]["Kind"], "destroy", status)

    def test_a_project_context_is_uploaded(self):
        import io
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            data = b"GREETING=hello\n"
            info = tarfile.TarInfo(".env")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        got = self.c.upload_context(buf.getvalue())
        self.assertTrue(got["upload"].startswith("upl_"))
        self.assertEqual(got["bytes"], len(buf.getvalue()))

    def test_a_compose_file_inside_a_wider_context(self):
        import io
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in (("ops/.env", b"TAG=7\n"), ("conf/app.conf", b"a=1\n")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        up = self.c.upload_context(buf.getvalue())
        compose = 'services:\n  app:\n    image: "busybox:${TAG}"\n    volumes: ["../conf:/etc/app:ro"]\n'
        self.c.create_project("py-wide")
        started = self.c.deploy("py-wide", compose, context=up["upload"], compose_path="ops/compose.yaml")
        done = self.c.wait(started["deployment"]["ID"], timeout=120)
        spec = [v for v in self.c.env_versions(done["deployment"]["EnvID"])][-1]["Spec"]
        self.assertEqual(spec["services"][0]["image"], "busybox:7")
        self.assertEqual(spec["services"][0]["binds"][0]["source"], "conf")
        self.assertEqual(spec["context"]["compose_path"], "ops/compose.yaml")

    def test_a_warm_pool_is_set_read_and_removed(self):
        version, _ = healthy_version(self.c)
        self.assertEqual(self.c.set_pool(version, 0)["size"], 0)
        self.assertEqual(self.c.pool(version)["size"], 0)
        self.c.delete_pool(version)

    def test_concurrent_episodes_from_threads(self):
        version, _ = healthy_version(self.c)

        def one(n):
            with self.c.episode(from_version=version) as ep:
                ep.put_file("/work/n.txt", str(n))
                return ep.env_id, ep.get_file("/work/n.txt"), ep.verify()

        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(one, range(8)))
        self.assertEqual(len({env for env, _, _ in results}), 8, "each episode has its own sandbox")
        self.assertEqual([got for _, got, _ in results], [str(n).encode() for n in range(8)])
        self.assertEqual([reward for _, _, reward in results], [1] * 8)


if __name__ == "__main__":
    unittest.main()
