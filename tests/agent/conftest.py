"""Fixtures of the agent tests: a real blind server (tests/sync's backends and processes), a
vault linked to it and closed again (the agent process opens it), and agent processes."""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sync"))

from agentkit import AgentProcess, agent_env  # noqa: E402
from synckit import Backend, Devices, ServerProcess, make_backend  # noqa: E402


def _tag(request: pytest.FixtureRequest) -> str:
    return "agent_" + request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    with make_backend(request.param, tmp_path_factory.mktemp(f"{request.param}-store"), _tag(request)) as b:
        yield b


@pytest.fixture(scope="module")
def sqlite_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    with make_backend("sqlite", tmp_path_factory.mktemp("sqlite-store"), _tag(request)) as b:
        yield b


@pytest.fixture
def servers() -> Iterator[Callable[..., ServerProcess]]:
    made: list[ServerProcess] = []

    def start(backend: Backend, **kw: object) -> ServerProcess:
        s = ServerProcess(backend, **kw)  # type: ignore[arg-type]
        made.append(s)
        return s.start()

    yield start
    for s in made:
        s.stop()


@pytest.fixture
def devices(tmp_path: Path) -> Iterator[Devices]:
    d = Devices(tmp_path / "devices")
    yield d
    d.close()


@dataclass
class AgentVault:
    """A vault folder linked to ``server_url`` under ``name``, closed, for an agent process."""

    folder: Path
    name: str
    server_url: str
    root: Path

    @property
    def env(self) -> dict[str, str]:
        return agent_env(self.folder, self.root)


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
