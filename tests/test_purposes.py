"""One registry of key-derivation purposes (ownmem.purposes; DESIGN.md "Keys"): every purpose
key goes through it, no product module spells an info string of its own, and the registry keeps
one key per purpose."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ownmem.aperto import keys
from ownmem.crypto import provider, run_sync
from ownmem.errors import MalformedInput
from ownmem.purposes import AGENT_AUTHOR_PREFIX, SLOT_SECRET_PREFIX, AgentAuthor, Purpose, SlotSecret

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "py" / "ownmem" / "purposes.py"
MASTER = bytes(range(32))


def test_each_purpose_has_its_own_info_string() -> None:
    infos = [p.info for p in Purpose]
    assert len(set(infos)) == len(infos)
    assert all(i.startswith(b"ownmem/v1/") and not i.startswith(AGENT_AUTHOR_PREFIX) for i in infos)


def test_no_product_module_spells_an_info_string_of_the_registry() -> None:
    """A purpose's info string written out anywhere else would be a second derivation that the
    registry does not see (a typo there is a different key, silently)."""
    spelt = {p.info for p in Purpose} | {AGENT_AUTHOR_PREFIX, SLOT_SECRET_PREFIX} | {
        SlotSecret(k).info for k in ("recovery", "passkey")}
    found = []
    for path in [*(ROOT / "py" / "ownmem").rglob("*.py"), *(ROOT / "server").rglob("*.py")]:
        if path == REGISTRY:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, (bytes, str)):
                value = node.value.encode("utf-8", "replace") if isinstance(node.value, str) else node.value
                if value in spelt:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_a_purpose_key_is_derived_only_for_a_registered_purpose() -> None:
    p = provider()
    for bare in (keys.INFO_SIGN, Purpose.AUDIT.info, b"ownmem/v1/anything"):
        with pytest.raises(MalformedInput):
            run_sync(keys.derive_purpose_key(p, MASTER, bare))  # type: ignore[arg-type]  # the point: untyped callers
    audit = run_sync(keys.derive_purpose_key(p, MASTER, Purpose.AUDIT))
    assert audit == run_sync(p.hkdf_sha256(MASTER, b"ownmem/v1/audit"))     # the info string of DESIGN.md "Keys"
    planner = run_sync(keys.derive_purpose_key(p, MASTER, AgentAuthor("planner.0123456789abcdef")))
    assert planner == run_sync(p.hkdf_sha256(MASTER, b"ownmem/v1/agent/planner.0123456789abcdef"))
    assert len({audit, planner, run_sync(keys.derive_purpose_key(p, MASTER, Purpose.SYNC))}) == 3


def test_an_unlock_slot_key_is_of_the_slot_secret_and_its_kind() -> None:
    """An unlock slot's key derives from the slot's own secret (vault/slots.py), one info string
    per kind under the registry's prefix, none equal to a root purpose's."""
    from ownmem.vault.slots import KINDS, slot_secret_key
    p = provider()
    infos = {SlotSecret(k).info for k in KINDS}
    assert len(infos) == len(KINDS) and not infos & {x.info for x in Purpose}
    assert all(i.startswith(SLOT_SECRET_PREFIX) for i in infos)
    seed, _ = run_sync(slot_secret_key(p, "passkey", MASTER))
    assert seed == run_sync(p.hkdf_sha256(MASTER, b"ownmem/v1/unlock-slot/passkey"))   # DESIGN.md "Keys"
