"""Fixtures of the UOMP tests: the agent tests' real blind server and real `ownmem agent`
process, on a vault holding UOMP items written by the person's device."""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sync"))

from synckit import Devices  # noqa: E402
from uompkit import APPROVAL_KEYS, UompVault  # noqa: E402

from ownmem.usecases.items import put_item  # noqa: E402
from ownmem.uomp.approval import APPROVAL_INFO  # noqa: E402
from ownmem.uomp.tokens import AUTH_INFO  # noqa: E402


def _agent_fixtures() -> Any:
    path = Path(__file__).resolve().parents[1] / "agent" / "conftest.py"
    spec = importlib.util.spec_from_file_location("agent_conftest_uomp", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod      # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


_a = _agent_fixtures()
backend, sqlite_backend, servers, devices, agents = _a.backend, _a.sqlite_backend, _a.servers, _a.devices, _a.agents
AgentVault = _a.AgentVault

ITEMS: list[tuple[str, Any, tuple[str, ...], str]] = [
    ("preference.theme", "dark", ("preference", "ui"), "low"),
    ("preference.lang", "en", ("preference",), "low"),
    ("preference.card", "4111-1111", ("preference", "financial"), "medium"),
    ("preference.secret", "hunter2", ("preference",), "high"),
    ("user.password", "pw", ("identity",), "high"),
    ("user.display_name", "Ada", ("identity",), "low"),
    ("holding.a", {"market_value": 100}, ("portfolio",), "medium"),
    ("holding.b", {"market_value": 200}, ("portfolio",), "medium"),
    ("holding.c", {"market_value": 300}, ("portfolio",), "medium"),
    ("solo.x", {"market_value": 42}, ("solo",), "medium"),
]


_n = [0]


@pytest.fixture
def uomp_vault(devices: Devices, tmp_path: Path) -> Callable[..., UompVault]:
    def make(server_url: str, items: list[tuple[str, Any, tuple[str, ...], str]] = ITEMS) -> UompVault:
        _n[0] += 1
        name = f"uomp{_n[0]}-{tmp_path.name[-12:].lower().replace('_', '-')}"
        d = devices.first(server_url, name, label="owner", sync=False)
        for key, value, tags, sens in items:
            put_item(d.v, key, value, tags=tags, sensitivity=sens)
        d.v.add("a plain note without any uomp key", tags=("preference",))
        d.sync()
        seed = d.v.purpose_key(AUTH_INFO)
        folder = d.folder
        assert folder is not None
        APPROVAL_KEYS[str(folder)] = d.v.purpose_key(APPROVAL_INFO)
        d.v.close()
        d.client.close()
        devices.made.remove(d)
        return UompVault(AgentVault(folder, name, server_url, tmp_path), seed)
    return make


@pytest.fixture(autouse=True)
def _close_clients() -> Any:
    from uompkit import OPEN

    yield
    while OPEN:
        OPEN.pop().close()
