"""Python client of the svc environment control service (standard library only).

    from svc_client import Client
    c = Client()                      # SVC_SERVER / SVC_API_KEY, else ~/.config/svc/config.json
    with c.episode(from_version="ver_...") as ep:
        ep.exec(["sh", "-c", "make test"])
        reward = ep.verify()
"""

from .client import Client, SvcError
from .episode import Episode

__all__ = ["Client", "Episode", "SvcError"]
__version__ = "0.1.0"
