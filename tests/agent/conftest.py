"""Fixtures of the agent tests: a real blind server (tests/sync's backends and processes), a
vault linked to it and closed again (the agent process opens it), and agent processes."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.agentkit import AgentProcess, AgentVault

# the sync tests' backends, server processes and devices are these tests' fixtures too (one definition of each)
from tests.sync.conftest import backend, devices, servers, sqlite_backend  # noqa: F401
from tests.sync.synckit import Devices

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

    def start(v: AgentVault, **kw: Any) -> AgentProcess:
        a = AgentProcess(v.folder, v.root, **kw)
        made.append(a)
        return a.start()

    yield start
    for a in made:
        a.stop()
