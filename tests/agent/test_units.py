"""The pure parts of the agent service: the recall index, credential checks, the bind rule."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ownmem.agent.credentials import FILENAME, Credential, CredentialFile, authenticate, token_digest
from ownmem.agent.recall_index import RecallEntry, RecallIndex, fts_query
from ownmem.agent.service import BindRefused, check_bind
from ownmem.errors import MalformedInput, NotFound, VaultError

HOLDER, OTHER = bytes(range(32)), bytes(32)


def entry(n: int, text: str, *, ts: int = 0, holder: bytes = HOLDER, trust: str = "self") -> RecallEntry:
    return RecallEntry(bytes([n]) * 32, text, holder, bytes([n]) * 16, 1, ts or n, "STANDARD", b"\x01" * 8, trust,
                       "signed", b"\x02" * 8, False)


def test_ranking_is_bm25_and_an_empty_query_lists_newest_first() -> None:
    ix = RecallIndex()
    ix.put([entry(1, "tea"), entry(2, "tea tea tea with milk"), entry(3, "coffee, no tea at all, none whatsoever"),
            entry(4, "the car")])
    # term frequency and document length both count: the long text that says it once comes last
    assert [e.plaintext for e in ix.search("tea")] == ["tea tea tea with milk", "tea",
                                                       "coffee, no tea at all, none whatsoever"]
    assert [e.cell_id[0] for e in ix.search(None)] == [4, 3, 2, 1]
    assert [e.cell_id[0] for e in ix.search("  ")] == [4, 3, 2, 1]
    # several words: any of them, those with more of them first
    assert [e.cell_id[0] for e in ix.search("milk tea")][0] == 2
    # diacritics and case fold: "Café" finds "cafe"
    ix.put([entry(5, "Café au lait")])
    assert [e.cell_id[0] for e in ix.search("cafe")] == [5]


def test_query_syntax_is_never_interpreted() -> None:
    assert fts_query('tea" OR "x') == '"tea"* OR "or"* OR "x"*'
    assert fts_query("!!!") is None
    ix = RecallIndex()
    ix.put([entry(1, "NEAR the door"), entry(2, "a * star")])
    for q in ('"', "NEAR(", "NOT", "AND OR", "col:tea", "^tea", "tea*", "(((", "\x00"):
        assert isinstance(ix.search(q), list)
    assert [e.cell_id[0] for e in ix.search("*")] == [2]        # containment: no word in the query


def test_edits_removals_and_shared_cells() -> None:
    ix = RecallIndex()
    ix.put([entry(1, "old text")])
    ix.put([entry(1, "new text")])         # the same cellId replaced, not doubled
    assert [e.plaintext for e in ix.search("text")] == ["new text"] and len(ix) == 1
    ix.put_shared([entry(9, "their text", holder=OTHER, trust="self")])
    theirs = ix.get(bytes([9]) * 32)
    assert theirs is not None and theirs.trust == "shared" and ix.is_shared(bytes([9]) * 32)
    assert theirs.to_json()["holderIdHex"] == OTHER.hex() and theirs.to_json()["ownmemTrust"] == "shared"
    removed = ix.remove([bytes([1]) * 32, bytes([7]) * 32])
    assert [e.plaintext for e in removed] == ["new text"]
    assert [e.plaintext for e in ix.search("text")] == ["their text"]
    ix.remove([bytes([9]) * 32])
    assert ix.search(None) == [] and not ix.is_shared(bytes([9]) * 32)


def test_an_element_carries_every_field_and_the_labels() -> None:
    j = entry(3, "x", ts=1747526400).to_json()
    assert j == {"cellId": "03" * 32, "plaintext": "x", "holderIdHex": HOLDER.hex(), "cellNonce": "03" * 16,
                 "kekVersion": 1, "timestamp": "1747526400", "tier": "STANDARD", "holderSignaturePrefix": "01" * 8,
                 "ownmemTrust": "self",
                 "ownmemAuthorship": {"authorship": "signed", "authorKey": "AgICAgICAgI", "custody": False}}


def test_authenticate_takes_only_a_live_bearer_of_a_stored_hash() -> None:
    now = 1_000_000
    live = Credential("a", token_digest("om_agent_good"), now - 10, None, None)
    dated = Credential("b", token_digest("om_agent_old"), now - 10, now, None)
    creds = (live, dated)
    assert authenticate(creds, "Bearer om_agent_good", now) == live
    assert authenticate(creds, "Bearer om_agent_old", now - 1) == dated
    for bad in (None, "", "om_agent_good", "Basic om_agent_good", "Bearer om_agent_goo", "Bearer om_agent_old",
                "bearer om_agent_good", "Bearer " + "x" * 600):
        assert authenticate(creds, bad, now) is None, bad


def test_the_credential_file_keeps_hashes_only_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    f = CredentialFile(tmp_path)
    issued = f.issue("claude", int(time.time()), expires_days=1)
    token = issued.header.removeprefix("Bearer ")
    raw = (tmp_path / FILENAME).read_text()
    assert token not in raw and token_digest(token).hex() in raw
    assert (tmp_path / FILENAME).stat().st_mode & 0o777 == 0o600
    assert authenticate(f.all(), issued.header, int(time.time())) is not None
    with pytest.raises(VaultError):
        f.issue("claude", 0)
    for bad in ("", "Claude", "a b", "-x", "x" * 65, "../x"):
        with pytest.raises(MalformedInput):
            f.issue(bad, 0)
    with pytest.raises(MalformedInput):
        f.issue("neg", 0, expires_days=-1)
    with pytest.raises(NotFound):
        f.revoke("nobody")
    f.revoke("claude")
    assert f.all() == ()
    (tmp_path / FILENAME).write_text(json.dumps({"credentials": [{"name": "x"}]}))
    os.utime(tmp_path / FILENAME, ns=(1, 1))
    with pytest.raises(VaultError):
        f.all()


def test_only_loopback_ipv4_is_a_bind_address() -> None:
    check_bind("127.0.0.1")
    for host in ("0.0.0.0", "localhost", "::1", "::", "127.0.0.2", "10.0.0.1", "127.0.0.1 "):
        with pytest.raises(BindRefused):
            check_bind(host)
