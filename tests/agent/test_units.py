"""The pure parts of the agent service: the recall index, credential checks, the bind rule."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ownmem.agent.credentials import FILENAME, Credential, CredentialFile, authenticate, token_digest
from ownmem.agent.port import BindRefused, check_bind
from ownmem.agent.recall_index import RecallEntry, RecallIndex
from ownmem.errors import MalformedInput, NotFound, VaultError
from ownmem.scrub import scrubbed

HOLDER, OTHER = bytes(range(32)), bytes(32)


def entry(n: int, text: str, *, ts: int = 0, holder: bytes = HOLDER, trust: str = "self") -> RecallEntry:
    return RecallEntry(bytes([n]) * 32, text, holder, bytes([n]) * 16, 1, ts or n, "STANDARD", b"\x01" * 8, trust,
                       "signed", b"\x02" * 8, False)


def test_ranking_is_bm25_and_an_empty_query_lists_newest_first() -> None:
    ix = RecallIndex()
    # a day apart: memories written together also lift each other (ownmem.recall.ranking)
    day = 86_400
    ix.put([entry(1, "tea", ts=day), entry(2, "tea tea tea with milk", ts=2 * day),
            entry(3, "coffee, no tea at all, none whatsoever", ts=3 * day), entry(4, "the car", ts=4 * day)])
    # term frequency and document length both count: the long text that says it once comes last
    assert [e.plaintext for e in ix.search("tea")] == ["tea tea tea with milk", "tea",
                                                       "coffee, no tea at all, none whatsoever"]
    assert [e.cell_id[0] for e in ix.search(None)] == [4, 3, 2, 1]
    assert [e.cell_id[0] for e in ix.search("  ")] == [4, 3, 2, 1]
    # several words: any of them, those with more of them first
    assert [e.cell_id[0] for e in ix.search("milk tea")][0] == 2
    # diacritics and case fold: "Café" finds "cafe"
    ix.put([entry(5, "Café au lait", ts=5 * day)])
    assert [e.cell_id[0] for e in ix.search("cafe")] == [5]


def test_query_syntax_is_never_interpreted() -> None:
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


KEY = bytes(range(32))        # stands for the vault's purpose key ownmem/v1/agent-credentials


def test_the_credential_file_keeps_hashes_only_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    f = CredentialFile(tmp_path, KEY)
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


def _append(folder: Path, entry: dict[str, object]) -> None:
    doc = json.loads((folder / FILENAME).read_text())
    doc["credentials"].append(entry)
    (folder / FILENAME).write_text(json.dumps(doc))
    os.utime(folder / FILENAME, ns=(time.time_ns(), time.time_ns() + 1))


def _forged(name: str, token: str, **extra: object) -> dict[str, object]:
    return {"name": name, "sha256": token_digest(token).hex(), "created": 1, "expires": None, "last_used": None,
            "migrated": False, **extra}


def test_an_entry_written_without_the_key_authenticates_nobody(tmp_path: Path) -> None:
    """Minting a credential by writing agent-credentials.json: with no seal, a made-up one, the
    person's seal copied onto it, or the person's entry with one field changed, it is refused."""
    f = CredentialFile(tmp_path, KEY)
    f.migrate()
    now = int(time.time())
    person = f.issue("claude", now, expires_days=1)
    with pytest.raises(VaultError, match="passphrase"):
        CredentialFile(tmp_path).issue("evil", now)          # the CLI without the key issues nothing
    mac = json.loads((tmp_path / FILENAME).read_text())["credentials"][0]["mac"]
    _append(tmp_path, _forged("plain", "om_agent_plain"))
    _append(tmp_path, _forged("madeup", "om_agent_madeup", mac="00" * 32))
    _append(tmp_path, _forged("copied", "om_agent_copied", mac=mac))
    _append(tmp_path, _forged("migrated", "om_agent_migrated", migrated=True))
    for token in ("om_agent_plain", "om_agent_madeup", "om_agent_copied", "om_agent_migrated"):
        assert authenticate(f.all(), f"Bearer {token}", now) is None, token
    assert [c.name for c in f.all()] == ["claude"]
    assert authenticate(f.all(), person.header, now) is not None
    # the person's own entry, widened by hand (no expiry), is refused too: the seal covers every field
    doc = json.loads((tmp_path / FILENAME).read_text())
    doc["credentials"][0]["expires"] = None
    (tmp_path / FILENAME).write_text(json.dumps(doc))
    os.utime(tmp_path / FILENAME, ns=(time.time_ns(), time.time_ns() + 2))
    assert authenticate(f.all(), person.header, now) is None
    # the keyless view (`credential list`) shows every entry as written, to be reviewed
    assert {c.name for c in CredentialFile(tmp_path).all()} == {"claude", "plain", "madeup", "copied", "migrated"}


def test_touch_keeps_the_seal_and_revoking_needs_no_key(tmp_path: Path) -> None:
    f = CredentialFile(tmp_path, KEY)
    f.migrate()
    now = int(time.time())
    issued = f.issue("claude", now)
    cred = authenticate(f.all(), issued.header, now)
    assert cred is not None
    f.touch(cred, now + 100)
    again = authenticate(f.all(), issued.header, now + 100)
    assert again is not None and again.last_used == now + 100
    CredentialFile(tmp_path).revoke("claude")
    assert authenticate(f.all(), issued.header, now + 100) is None


def test_entries_from_before_the_seal_are_adopted_once_and_never_again(tmp_path: Path) -> None:
    """The upgrade: a file of unsealed entries is adopted at the service's first start, each
    marked migrated; an unsealed entry written afterwards is refused, and removing the marker
    does not reopen the migration while a sealed entry remains."""
    (tmp_path / FILENAME).write_text(json.dumps({"version": 1, "credentials": [
        {"name": "old", "sha256": token_digest("om_agent_old").hex(), "created": 5, "expires": None,
         "last_used": 7}]}))
    f = CredentialFile(tmp_path, KEY)
    assert f.all() == ()                     # before the migration nothing unsealed is accepted
    assert f.migrate() == ("old",)
    old = authenticate(f.all(), "Bearer om_agent_old", 10)
    assert old is not None and old.migrated and (old.created, old.last_used) == (5, 7)
    assert CredentialFile(tmp_path).all()[0].migrated          # listed as migrated
    assert f.migrate() == ()
    _append(tmp_path, _forged("late", "om_agent_late"))
    assert f.migrate() == ()
    assert authenticate(f.all(), "Bearer om_agent_late", 10) is None
    (tmp_path / "agent-credentials.migrated").unlink()
    assert f.migrate() == ()
    assert authenticate(f.all(), "Bearer om_agent_late", 10) is None
    # another vault's key finds nothing sealed
    other = CredentialFile(tmp_path, bytes(32))
    assert other.all() == ()


def test_scrubbed_zeroes_only_the_named_entry_of_an_environment_block() -> None:
    block = b"PATH=/bin\0OWNMEM_PASSPHRASE=hunter2 two\0OWNMEM_PASSPHRASE_X=keep\0XOWNMEM_PASSPHRASE=keep\0HOME=/h\0"
    out = scrubbed(block, "OWNMEM_PASSPHRASE")
    assert len(out) == len(block) and b"hunter2" not in out
    assert out == block.replace(b"OWNMEM_PASSPHRASE=hunter2 two", bytes(len(b"OWNMEM_PASSPHRASE=hunter2 two")))
    assert scrubbed(b"", "X") == b"" and scrubbed(b"X=1", "X") == b"\0\0\0"
