"""Where `ownmem agent` listens: its defaults, the bind rule, and ``agent-port.json``.  Apart
from service.py (which imports starlette and the operator) so that the command line names the
defaults and reads the port file without loading the service."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ownmem.errors import OwnmemError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9374
PATH = "/saihm"


class BindRefused(OwnmemError):
    code = "bind_refused"


def check_bind(host: str) -> None:
    """Only 127.0.0.1: not 0.0.0.0, not a LAN address, not a host name (which /etc/hosts or DNS
    could point anywhere)."""
    if host != DEFAULT_HOST:
        raise BindRefused(f"ownmem agent listens on {DEFAULT_HOST} only (refused {host!r}): it serves your "
                          "memories in plaintext to credential holders over plain HTTP, which is safe on "
                          "loopback only")


@dataclass(frozen=True, slots=True)
class PortFile:
    """Where a running ``ownmem agent`` of this vault listens: ``agent-port.json`` in the vault
    folder, {"host", "port", "pid"}.  Written by the service at start and removed at stop, so
    that `ownmem agent connect` gives the host the port the service runs on, not a default the
    person must repeat.  A file a killed service left (its pid gone) is read as absent.  It is a
    hint, not a trust anchor: whoever can write the vault folder can point it elsewhere, and the
    host's configuration then names a loopback port that is not the agent's (http to 127.0.0.1
    only, the client refuses any other host)."""

    host: str
    port: int
    pid: int

    NAME = "agent-port.json"

    @classmethod
    def path(cls, folder: str | os.PathLike[str]) -> Path:
        return Path(folder) / cls.NAME

    def write(self, folder: str | os.PathLike[str]) -> None:
        p = self.path(folder)
        tmp = p.with_name(p.name + f".{self.pid}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"host": self.host, "port": self.port, "pid": self.pid}, f)
        os.replace(tmp, p)

    def remove(self, folder: str | os.PathLike[str]) -> None:
        """Removed only while it is this process's: a second service's file stays."""
        if PortFile.read(folder, alive_only=False) == self:
            self.path(folder).unlink(missing_ok=True)

    @classmethod
    def read(cls, folder: str | os.PathLike[str], *, alive_only: bool = True) -> PortFile | None:
        try:
            doc = json.loads(cls.path(folder).read_text())
            got = cls(str(doc["host"]), int(doc["port"]), int(doc["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not 0 < got.port < 65536 or got.host != DEFAULT_HOST:
            return None
        return got if not alive_only or _alive(got.pid) else None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True        # another user's process has this pid: not ours, but something runs
    return True
