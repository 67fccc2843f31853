"""Run the blind server: python -m server [--host 127.0.0.1] [--port 8000] [--workers N]."""
from __future__ import annotations

import argparse

import uvicorn

SHUTDOWN_GRACE = 5   # seconds in-flight requests get to finish after SIGTERM


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m server")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args()
    # Event streams never end on their own, and uvicorn's graceful shutdown waits for every
    # open response: without a bound, SIGTERM hung for as long as one device was watching.
    # Past the bound the streams are cut (watching clients reconnect); writes are atomic.
    uvicorn.run("server.app:create_app", factory=True, host=a.host, port=a.port, workers=a.workers,
                log_level="warning", access_log=False, timeout_graceful_shutdown=SHUTDOWN_GRACE)


if __name__ == "__main__":
    main()
