"""The typed control records (ownmem.uomp.control: one make, one parse, only the owner's count) and
who wrote a memory (ownmem.usecases.authors.written_by, the one rule the PWA, the staged writes and
recall share), on a real vault."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.model import Memory, Trust
from ownmem.crypto import run_sync
from ownmem.uomp.agents import valid_agent_id
from ownmem.uomp.control import Confirmation, Request, Revocation, SessionRecord, ShareTerms, is_bookkeeping, is_control
from ownmem.usecases.authors import AgentKeys, agent_info, author_key, bound_agent, written_by
from ownmem.usecases.listing import memories, shown
from ownmem.usecases.sessions import revoke_session
from ownmem.vault import Entry, UnlockedVault, Vault

Seal = Callable[..., bytes]
Sealed = tuple[UnlockedVault, Seal, aperto_keys.SigningKey, aperto_keys.SigningKey]


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[UnlockedVault, Seal, aperto_keys.SigningKey, aperto_keys.SigningKey]:
    v = Vault.create(tmp_path / "v", "use cases: a grey heron on the old pier 4")
    agent = author_key(v, "planner.0123456789abcdef")
    stranger = run_sync(aperto_keys.signing_key(v.crypto, os.urandom(32)))
    v.trust_add(agent.public)
    v.trust_add(stranger.public)

    def seal(ext: dict[str, object], content: str = "m", signer: aperto_keys.SigningKey | None = None) -> bytes:
        m = Memory(content=content, created=1, tool="t", extensions=ext)
        return v._seal_into(m, v.scope("default"), signer).object_id

    return v, seal, agent, stranger


def _by_id(v: UnlockedVault) -> dict[bytes, Entry]:
    return {e.id: e for e in v.open_all(allow_unverified=True).entries}


def test_each_record_parses_what_make_wrote_and_only_the_owners(sealed: Sealed) -> None:
    v, seal, agent, stranger = sealed
    records: list[Revocation | Confirmation | SessionRecord] = [Revocation("sess_a", 7), Confirmation(b"\x05" * 16),
               SessionRecord({"kind": "agent", "agent_id": "planner"})]
    mine = [seal(r.make()) for r in records]
    theirs = [seal(r.make(), signer=agent) for r in records] + [seal(r.make(), signer=stranger) for r in records]
    got = _by_id(v)
    for r, oid in zip(records, mine, strict=False):
        assert type(r).parse(got[oid].opened) == r
        assert is_control(got[oid].opened.extensions)
    for r, oid in zip(records * 2, theirs, strict=False):
        assert type(r).parse(got[oid].opened) is None          # an agent's or a stranger's has no effect
        assert is_control(got[oid].opened.extensions)           # and is still no memory to show
    # a revocation of another trust level (unverified, trusted) is none either
    e = got[mine[0]]
    for trust in (Trust.TRUSTED, Trust.UNVERIFIED):
        assert Revocation.parse(replace(e.opened, trust=trust)) is None


def test_a_request_round_trips_and_a_malformed_one_is_none(sealed: Sealed) -> None:
    v, seal, agent, _ = sealed
    terms = ShareTerms((b"\x02" * 32,), "temporary", "read", None)
    r = Request.of("share", "planner.0123456789abcdef", [b"\x01" * 16], [b"\x03" * 32], terms)
    good = seal(r.make(), signer=agent)
    bad = [seal({"uomp_request": {**r.make()["uomp_request"], "kind": "erase"}}, signer=agent),   # type: ignore[dict-item]
           seal({"uomp_request": {**r.make()["uomp_request"], "agent_id": "Planner"}}, signer=agent),  # type: ignore[dict-item]
           seal(Request.of("share", "planner", [b"\x01" * 16], [b"\x03" * 32], None).make(), signer=agent)]
    got = _by_id(v)
    assert Request.parse(got[good].opened) == r
    assert [Request.parse(got[b].opened) for b in bad] == [None, None, None]
    assert is_bookkeeping(got[good].opened.extensions) and not is_bookkeeping(Revocation("s").make())


def test_revoke_session_seals_the_one_revocation_record(sealed: Sealed) -> None:
    v, _, _, _ = sealed
    oid = revoke_session(v, "sess_garden", now=1234)
    e = _by_id(v)[oid]
    assert Revocation.parse(e.opened) == Revocation("sess_garden", 1234)
    assert Revocation.TAG in e.opened.tags


def test_the_listing_leaves_every_control_record_out(sealed: Sealed) -> None:
    v, seal, agent, _ = sealed
    memory = seal({}, "the person's note")
    for r in (Revocation("s", 1), Confirmation(memory), SessionRecord({"kind": "agent", "agent_id": "a"})):
        seal(r.make())
    seal(Request.of("forget", "planner.0123456789abcdef", [memory], [b"\x03" * 32], None).make(), signer=agent)
    seal({"uomp_audit": {}})
    listing = v.open_all()
    assert [e.id for e in shown(listing).entries] == [memory] == [e.id for e in memories(listing.entries)]
    assert len(shown(listing).refused) == len(listing.refused)


def test_written_by_names_an_agent_only_under_one_rule_and_its_key_proves_it(sealed: Sealed) -> None:
    v, seal, agent, stranger = sealed
    name = "planner.0123456789abcdef"
    claim = {"uomp": {"source": "agent", "agent_id": name}}
    own = seal(claim, signer=agent)
    forged = seal(claim, signer=stranger)
    person = seal(claim)                     # the owner's key: its agent is not proven by it either
    bad_name = seal({"uomp": {"source": "agent", "agent_id": "Planner"}}, signer=author_key(v, "Planner"))
    plain = seal({}, "plain")
    got, keys = _by_id(v), AgentKeys(v)
    assert written_by(got[own], keys) is not None and written_by(got[own], keys).confirmed   # type: ignore[union-attr]
    assert bound_agent(got[own], keys) == name
    w = written_by(got[forged], keys)
    assert w is not None and w.agent_id == name and not w.confirmed and bound_agent(got[forged], keys) is None
    assert bound_agent(got[person], keys) is None
    # "Planner" is no agent id (uomp.agents): the PWA names no agent for it, as recall and staging do
    assert not valid_agent_id("Planner") and written_by(got[bad_name], keys) is None
    assert written_by(got[plain], keys) is None


def test_the_author_key_is_the_one_derivation(sealed: Sealed) -> None:
    v, _, agent, _ = sealed
    assert agent_info("planner").info == b"ownmem/v1/agent/planner"
    assert agent.key_id == AgentKeys(v).key_id("planner.0123456789abcdef")
