"""Fixtures of the UOMP tests: the agent tests' real blind server and real `ownmem agent`
process, on a vault holding UOMP items written by the person's device."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ownmem.uomp.approval import APPROVAL_INFO
from ownmem.uomp.tokens import AUTH_INFO
from ownmem.usecases.items import put_item
from tests.agent.agentkit import AgentVault

# the agent and sync tests' server, vault and agent fixtures are these tests' too (one definition of each)
from tests.agent.conftest import agent_vault, agents  # noqa: F401
from tests.sync.conftest import backend, devices, servers, sqlite_backend  # noqa: F401
from tests.sync.synckit import Devices
from tests.uomp.uompkit import APPROVAL_KEYS, UompVault

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
    from tests.uomp.uompkit import OPEN

    yield
    while OPEN:
        OPEN.pop().close()
