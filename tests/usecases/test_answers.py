"""The person's answer to what an agent staged (ownmem.usecases.answers): one find, confirm and
discard for a staged write and a staged request, the one place the CLI and the PWA call; the
records import's vault side (ownmem.usecases.records) too."""
from __future__ import annotations

from pathlib import Path

import pytest

from ownmem.aperto.model import Memory
from ownmem.errors import NotFound
from ownmem.uomp.control import Confirmation, Request
from ownmem.uomp.records import parse, validate
from ownmem.usecases import answers
from ownmem.usecases.authors import AgentKeys, author_key
from ownmem.usecases.records import live_keys, write_records
from ownmem.usecases.requests import AgentRequest, pending as pending_requests
from ownmem.usecases.staged import StagedWrite, pending
from ownmem.vault import UnlockedVault, Vault
from ownmem.vault.sync import Syncer

AGENT = "planner.0123456789abcdef"


def _syncer() -> Syncer:
    raise AssertionError("a forget or a staged write needs no server")


@pytest.fixture
def v(tmp_path: Path) -> UnlockedVault:
    return Vault.create(tmp_path / "v", "use cases: a red boat under the bridge 2")


def _stage(v: UnlockedVault, ext: dict[str, object], content: str) -> bytes:
    key = author_key(v, AGENT)
    v.trust_add(key.public)
    return v._seal_into(Memory(content=content, created=1, tool="t", extensions=ext), v.scope("default"),
                        key).object_id


def test_a_staged_write_is_found_by_prefix_or_whole_id_confirmed_once(v: UnlockedVault) -> None:
    oid = _stage(v, {"uomp": {"source": "agent", "agent_id": AGENT, "staged": True}}, "a staged note")
    listing = v.open_all(allow_unverified=True)
    w = answers.find(v, oid.hex()[:10], listing)
    assert isinstance(w, StagedWrite) and w.agent_id == AGENT and w.entry.id == oid
    with pytest.raises(NotFound):                      # the page names what it listed: the whole id
        answers.find(v, oid.hex()[:10], listing, whole_id=True)
    assert answers.find(v, oid.hex(), listing, whole_id=True) == w
    done = answers.confirm(v, w, listing.entries, _syncer)
    assert done.request is None and done.erased == 0 and done.share is None
    entries = v.open_all().entries
    record = next(e for e in entries if e.id == done.confirmation)
    assert Confirmation.parse(record.opened) == Confirmation(oid)
    assert pending(entries, AgentKeys(v)) == []
    with pytest.raises(NotFound, match="not a staged agent write or request"):
        answers.find(v, oid.hex(), v.open_all(allow_unverified=True))


def test_discarding_a_staged_write_erases_it(v: UnlockedVault) -> None:
    oid = _stage(v, {"uomp": {"source": "agent", "agent_id": AGENT, "staged": True}}, "to be dropped")
    w = answers.find(v, oid.hex(), v.open_all(allow_unverified=True), whole_id=True)
    assert answers.discard(v, w) == 1
    assert oid not in v.store.object_ids()


def test_a_forget_request_is_done_here_when_confirmed_and_nothing_when_discarded(v: UnlockedVault) -> None:
    note = v.add("the person's note")
    other = v.add("another note")
    ask = _stage(v, Request.of("forget", AGENT, [note], [b"\x03" * 32], None).make(), "asks")
    drop = _stage(v, Request.of("forget", AGENT, [other], [b"\x04" * 32], None).make(), "asks again")
    listing = v.open_all(allow_unverified=True)
    r = answers.find(v, ask.hex(), listing, whole_id=True)
    assert isinstance(r, AgentRequest) and r.kind == "forget" and r.objects == (note,)
    done = answers.confirm(v, r, listing.entries, _syncer)
    assert done.request == r and done.erased == 1 and note not in v.store.object_ids()
    d = answers.find(v, drop.hex()[:8], v.open_all(allow_unverified=True))
    assert answers.discard(v, d) == 1
    assert other in v.store.object_ids() and drop not in v.store.object_ids()
    assert pending_requests(v.open_all().entries, AgentKeys(v)) == []


def test_records_are_written_and_replace_the_live_head_of_their_key(v: UnlockedVault) -> None:
    raw = parse(b'[{"key": "diet", "value": "vegetarian", "tags": ["food"], "sensitivity": "low"}]', "json", {})
    [first] = write_records(v, validate(raw), {}, now=5)
    assert {k: e.id for k, e in live_keys(v).items()} == {"diet": first}
    raw2 = parse(b'[{"key": "diet", "value": "vegan", "tags": ["food"], "sensitivity": "low"}]', "json", {})
    heads = live_keys(v)
    [second] = write_records(v, validate(raw2, existing_keys=frozenset(heads), replace=True), heads, now=6)
    assert {k: e.id for k, e in live_keys(v).items()} == {"diet": second}
