"""What counts as a control record (ownmem.uomp.control): the extensions every view leaves out."""
from __future__ import annotations

from ownmem.uomp.control import REVOCATION, is_bookkeeping, is_control


def test_revocations_and_confirmations_are_control_and_memories_are_not() -> None:
    assert is_control({REVOCATION: {"session_id": "sess_x"}})
    assert is_control({"uomp": {"confirms": "00" * 16}})
    assert not is_control({})
    assert not is_control({"uomp": {"source": "agent", "agent_id": "cal", "staged": True}})
    assert not is_control({"uomp": "confirms"})


def test_audit_batches_and_session_records_are_bookkeeping_and_what_has_an_effect_is_not() -> None:
    assert is_bookkeeping({"uomp_audit": {"v": 2}}) and is_bookkeeping({"uomp_session": {"session_id": "s"}})
    # a record that also carries a revocation or a confirmation has an effect: not bookkeeping
    assert not is_bookkeeping({"uomp_audit": {}, REVOCATION: {"session_id": "s"}})
    assert not is_bookkeeping({"uomp_session": {}, "uomp": {"confirms": "00" * 16}})
    assert not is_bookkeeping({REVOCATION: {"session_id": "s"}}) and not is_bookkeeping({})
