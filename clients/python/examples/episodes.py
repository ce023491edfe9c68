"""Runs N episodes of a version of the rl-environment-ops template in parallel and prints the rewards.

    python3 examples/episodes.py --version ver_... [--episodes 4] [--server URL]

Each episode forks the version into its own sandbox, lets a scripted "agent" answer the task, grades
it and releases the sandbox. Credentials: SVC_API_KEY (or `svc login`)."""

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

from svc_client import Client

# The scripted agent: odd episodes answer right, even ones wrong, so rewards differ.
RIGHT = "grep -c level=ERROR /work/incident.log > /work/answer.txt"
WRONG = "echo 0 > /work/answer.txt"


def episode(client, version, n):
    with client.episode(from_version=version) as ep:
        ep.exec(["sh", "-c", RIGHT if n % 2 else WRONG])
        return n, ep.verify()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--version", required=True)
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--server")
    a = p.parse_args(argv)
    client = Client(server=a.server)
    with ThreadPoolExecutor(max_workers=a.parallel) as pool:
        for n, reward in pool.map(lambda n: episode(client, a.version, n), range(1, a.episodes + 1)):
            print("episode %d: reward %s" % (n, reward), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
