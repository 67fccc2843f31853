"""What counts as a control record (ownmem.uomp.control): the extensions every view leaves out."""
from __future__ import annotations

from ownmem.uomp.api import REVOCATION
from ownmem.uomp.control import is_control


def test_revocations_and_confirmations_are_control_and_memories_are_not() -> None:
    assert is_control({REVOCATION: {"session_id": "sess_x"}})
    assert is_control({"uomp": {"confirms": "00" * 16}})
    assert not is_control({})
    assert not is_control({"uomp": {"source": "agent", "agent_id": "cal", "staged": True}})
    assert not is_control({"uomp": "confirms"})
