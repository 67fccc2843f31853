"""The periodic worker of the agent service's background writers (published.Publisher,
audit_sync.AuditSync): one daemon thread that runs ``work`` every ``interval`` seconds, or at
once when woken, until stopped.  A failing tick is logged and the next one tries again: the
service keeps serving, and what was not done stays due (records queued, audit rows after the
cursor)."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_log = logging.getLogger("ownmem.uomp")


class Ticker:
    def __init__(self, name: str, interval: float, work: Callable[[], object], failed: str) -> None:
        self.interval, self._work, self._failed = interval, work, failed
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float | None = 10) -> None:
        self._stop.set()
        self._wake.set()
        if timeout is not None and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._work()
            except Exception:   # noqa: BLE001 - retried on the next tick
                _log.exception(self._failed)
