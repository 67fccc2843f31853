"""Fixtures of the agent tests: a real blind server (tests/sync's backends and processes), a
vault linked to it and closed again (the agent process opens it), and agent processes."""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sync"))

from agentkit import AgentProcess, AgentVault  # noqa: E402
from synckit import Devices  # noqa: E402


def _sync_fixtures() -> Any:
    """tests/sync/conftest.py under another module name: its backends, server processes and
    devices are this folder's fixtures too (one definition of each)."""
    path = Path(__file__).resolve().parents[1] / "sync" / "conftest.py"
    spec = importlib.util.spec_from_file_location("sync_conftest", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_sync = _sync_fixtures()
backend, sqlite_backend, servers, devices = _sync.backend, _sync.sqlite_backend, _sync.servers, _sync.devices


_counter = [0]


@pytest.fixture
def agent_vault(devices: Devices, tmp_path: Path) -> Callable[[str], AgentVault]:
    def make(server_url: str, content: tuple[str, ...] = ()) -> AgentVault:
        _counter[0] += 1
        name = f"agent{_counter[0]}-{tmp_path.name[-12:].lower().replace('_', '-')}"
        d = devices.first(server_url, name, label="owner", sync=False)
        for c in content:
            d.v.add(c)
        d.sync()
        folder = d.folder
        assert folder is not None
        d.v.close()
        d.client.close()
        devices.made.remove(d)
        return AgentVault(folder, name, server_url, tmp_path)
    return make


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Callable[..., AgentProcess]]:
    made: list[AgentProcess] = []

    def start(v: AgentVault, **kw: object) -> AgentProcess:
        a = AgentProcess(v.folder, v.root, **kw)  # type: ignore[arg-type]
        made.append(a)
        return a.start()

    yield start
    for a in made:
        a.stop()
