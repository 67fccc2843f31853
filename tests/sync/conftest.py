"""Fixtures of the sync tests: server stores on both backends, server processes, devices.

Self-contained on purpose (tests/server/ has its own): helpers live in ``synckit``.
PostgreSQL cases skip with a visible reason when the database is unreachable, and
fail instead when the environment variable CI is set.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sync.synckit import Backend, Devices, ServerProcess, make_backend


def _tag(request: pytest.FixtureRequest) -> str:
    name: str = request.module.__name__
    return name.rsplit(".", 1)[-1].removeprefix("test_")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """A fresh server store per test module, on each backend."""
    with make_backend(request.param, tmp_path_factory.mktemp(f"{request.param}-store"), _tag(request)) as b:
        yield b


@pytest.fixture(scope="module")
def sqlite_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    with make_backend("sqlite", tmp_path_factory.mktemp("sqlite-store"), _tag(request)) as b:
        yield b


@pytest.fixture(scope="module")
def pg_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    with make_backend("postgres", tmp_path_factory.mktemp("pg-store"), _tag(request)) as b:
        yield b


@pytest.fixture
def servers() -> Iterator[Callable[..., ServerProcess]]:
    """Start server processes for one test; every one is stopped afterwards."""
    made: list[ServerProcess] = []

    def start(backend: Backend, **kw: Any) -> ServerProcess:
        s = ServerProcess(backend, **kw)
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
