"""Run the blind server: python -m server [--host 127.0.0.1] [--port 8000] [--workers N]."""
from __future__ import annotations

import argparse
import copy
import os
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from server.guard import DEFAULT_TRUSTED

SHUTDOWN_GRACE = 5   # seconds in-flight requests get to finish after SIGTERM
KEEPALIVE_IDLE = 5   # seconds an idle keep-alive connection is kept between requests


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args()
    # Event streams never end on their own, and uvicorn's graceful shutdown waits for every
    # open response: without a bound, SIGTERM hung for as long as one device was watching.
    # Past the bound the streams are cut (watching clients reconnect); writes are atomic.
    # The h11 protocol of guard.py bounds request headers in time and connections in number;
    # X-Forwarded-For is believed from the trusted proxies only (the rate limits key on it).
    uvicorn.run("server.app:create_app", factory=True, host=a.host, port=a.port, workers=a.workers,
                log_level="warning", access_log=False, timeout_graceful_shutdown=SHUTDOWN_GRACE,
                http="server.guard:GuardedH11Protocol", timeout_keep_alive=KEEPALIVE_IDLE,
                proxy_headers=True, forwarded_allow_ips=os.environ.get("OWNMEM_TRUSTED_PROXIES") or DEFAULT_TRUSTED,
                log_config=log_config())


def log_config() -> dict[str, Any]:
    """uvicorn's logging, and the server's own lines (a refused or timed-out connection, a client
    that left mid-request, a failure with its traceback) on stderr, one each, in every worker."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["ownmem"] = {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    config["handlers"]["ownmem"] = {"formatter": "ownmem", "class": "logging.StreamHandler",
                                    "stream": "ext://sys.stderr"}
    config["loggers"]["ownmem"] = {"handlers": ["ownmem"], "level": "INFO", "propagate": False}
    return config


if __name__ == "__main__":
    main()
