"""The agent manifests registered with a vault (``uomp-agents/`` in its folder): each kept
once validated and its publisher verified, and verified again against today's trust list
whenever it is read."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ownmem.errors import MalformedInput, NotFound
from ownmem.uomp.manifest import Manifest, RetentionView, load_manifest, retention_level
from ownmem.uomp.publisher import PublisherStatus, enforce_policy, gpg_signature_path, load_trust, verify_publisher

AGENTS_DIR = "uomp-agents"


# --- registered manifests --------------------------------------------------------------------

@dataclass(frozen=True)
class Registered:
    manifest: Manifest
    status: PublisherStatus
    retention: RetentionView


def _agents_dir(folder: str | os.PathLike[str]) -> Path:
    return Path(folder) / AGENTS_DIR


_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def register_manifest(folder: str | os.PathLike[str], path: str | os.PathLike[str], *,
                      now: datetime | None = None) -> Registered:
    """Validate, verify and keep a manifest (and its GPG signature) in the vault folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "uom.json"
    m = load_manifest(p)
    trust = load_trust(folder)
    sig = gpg_signature_path(p)
    status = verify_publisher(m, trust, gpg_signature=sig, now=now)
    enforce_policy(status, trust)
    d = _agents_dir(folder)
    d.mkdir(mode=0o700, exist_ok=True)
    target = d / f"{m.agent.id}.uom.json"
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(m.raw)
    os.replace(tmp, target)
    stale = target.with_name(target.name + ".asc")
    if sig is not None:
        stale.write_bytes(sig.read_bytes())
    elif stale.exists():
        stale.unlink()
    return Registered(m, status, retention_level(m.data_retention_policy))


def registered(folder: str | os.PathLike[str], agent_id: str, *, now: datetime | None = None) -> Registered:
    """A registered agent's manifest, verified again against today's trust list."""
    if not _ID.fullmatch(agent_id):
        raise MalformedInput("not an agent id")
    target = _agents_dir(folder) / f"{agent_id}.uom.json"
    if not target.exists():
        raise NotFound(f"no registered agent {agent_id!r} (register it with `ownmem agent register uom.json`)")
    m = load_manifest(target)
    status = verify_publisher(m, load_trust(folder), gpg_signature=gpg_signature_path(target), now=now)
    return Registered(m, status, retention_level(m.data_retention_policy))


def registered_ids(folder: str | os.PathLike[str]) -> list[str]:
    d = _agents_dir(folder)
    if not d.exists():
        return []
    return sorted(p.name[: -len(".uom.json")] for p in d.glob("*.uom.json"))
