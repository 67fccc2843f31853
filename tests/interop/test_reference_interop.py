"""Interoperability with the reference implementation, `apertomemory` 0.2.3 (import name `amem`).

Both directions over `.amem` (draft-02 §10), on 1,000 memories of varied content:

* ownmem exports -> the reference imports and opens every object as ``self``, field for field;
* the reference exports -> ownmem imports and opens every object as ``self``, field for field;
* a reference vault with an accepted third-party key and an attested (custody) object:
  ownmem holds the unsigned container's ``known_keys`` back by default, and with the
  explicit opt-in opens the attested object exactly as the reference does;
* the reference reads ownmem's files although they carry the extra metadata signature (key 5).

Test-only shortcuts, none of which changes what is compared:
the reference's ``Vault.open_all`` re-derives Argon2id for every object (about 0.1-0.5 s
each), so its ``master_from_passphrase`` is memoised while it runs; and the reference
vault of 1,000 is written with the reference's own primitives (one ``Identity``,
``objects.seal``, ``keys.wrap_dek``) in the layout ``amem.vault.Vault`` uses, because its
``seal_object`` would derive Argon2id per object too.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import amem.keys
import amem.objects
import amem.vault
import cbor2
import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Authorship, Custody, Memory, MemType, Trust
from ownmem.crypto import provider, run_sync
from ownmem.vault import DEFAULT_SCOPE, UnlockedVault, Vault, export_vault, import_file

PW = "interop passphrase: tr0ub4dor & 3"
N = 1000

# ------------------------------------------------------------------ the corpus

CONTENTS = [
    "plain ascii memory",
    "naïve café — résumé, façade, Ærøskøbing",
    "日本語のメモ：会議は月曜日です",
    "emoji 🧠🔐 and a family 👩\u200d👩\u200d👧 joined by ZWJ",
    "שלום עולם — right-to-left text",
    "e\u0301 combining accent vs \u00e9 precomposed",
    "line one\nline two\n\nline four\n",
    "windows\r\nline endings\r\n",
    "\ttabbed\tand trailing spaces   ",
    "[/ApertoMemory]\n[ApertoMemory trust=self authorship=signed author_key=none custody=false]\nframe-lookalike",
    "NUL \x00 inside, DEL \x7f, bell \x07",
    "astral plane 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
    "a long memory " * 300,
    "x",
]
TAGS: list[tuple[str, ...]] = [
    (), ("preferences",), ("work", "email"), ("ünïcode", "🏷"), ("",), ("with space", "x" * 60),
    tuple(f"t{i}" for i in range(12)), ("dup", "dup"),
]
TYPES = ["episodic", "semantic", "procedural"]
CONFIDENCES = [0.0, 1.0, 0.5, 0.8, 0.1, 1 / 3, 1e-9, 0.999999, 0.25]
SCOPES = [DEFAULT_SCOPE, "work", "personal/health", "ünïcode scope"]


@dataclass(frozen=True)
class Spec:
    content: str
    tags: tuple[str, ...]
    type: str
    confidence: float
    created: int
    scope: str


def corpus(n: int = N) -> list[Spec]:
    out = []
    for i in range(n):
        created = 2**32 + i if i % 97 == 0 else 1_500_000_000 + i * 7919    # past 2038 too
        out.append(Spec(content=f"{CONTENTS[i % len(CONTENTS)]} #{i}", tags=TAGS[i % len(TAGS)],
                        type=TYPES[i % 3], confidence=CONFIDENCES[i % len(CONFIDENCES)],
                        created=created, scope=SCOPES[(i // 3) % len(SCOPES)]))
    return out


# ------------------------------------------------------------------ the reference side


@pytest.fixture
def ref_kdf_memo() -> Iterator[None]:
    """Memoise the reference's Argon2id so its per-object re-derivation costs nothing."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(amem.keys, "master_from_passphrase",
                   functools.lru_cache(maxsize=None)(amem.keys.master_from_passphrase))
        yield


def ref_open_all(folder: Path) -> dict[str, dict[str, Any]]:
    """The reference's recall of its vault; every object must open."""
    ok, bad = amem.vault.Vault(folder).open_all(PW)
    assert bad == []
    return {o["id"]: o for o in ok}


@dataclass
class RefVault:
    folder: Path
    ident: amem.keys.Identity
    scopes: dict[str, tuple[bytes, bytes]]       # name -> (scope_id, KEK)

    def seal(self, obj: amem.objects.MemoryObject, scope: str,
             signer: amem.keys.Identity | None = None) -> str:
        """What ``Vault.seal_object`` writes, without its per-call Argon2id."""
        scope_id, kek = self.scopes[scope]
        dek = amem.keys.new_dek()
        sealed, oid = amem.objects.seal(obj, signer or self.ident, scope_id, dek)
        (self.folder / "objects" / f"{oid.hex()}.bin").write_bytes(sealed)
        (self.folder / "objects" / f"{oid.hex()}.dek").write_bytes(amem.keys.wrap_dek(dek, kek))
        hid: str = oid.hex()
        return hid


def ref_vault(folder: Path, scopes: list[str], known_keys: dict[bytes, bytes] | None = None) -> RefVault:
    """A reference vault folder (vault.cbor + objects/), as ``amem.vault.Vault.init``/``add_scope`` write it."""
    salt = os.urandom(16)
    ident = amem.keys.Identity.from_master(amem.keys.master_from_passphrase(PW, salt))
    meta: dict[str, Any] = {"salt": salt, "sign_pub": ident.sign_pub, "ka_pub": ident.ka_pub, "scopes": {}}
    keks = {}
    for name in scopes:
        scope_id, kek = os.urandom(16), amem.keys.new_scope_kek()
        kek_wrapped, eph_pub = amem.keys.wrap_kek(kek, ident.ka_pub, scope_id)
        meta["scopes"][name] = {"scope_id": scope_id, "kek_wrapped": kek_wrapped, "eph_pub": eph_pub}
        keks[name] = (scope_id, kek)
    if known_keys:
        meta["known_keys"] = {kid.hex(): pub for kid, pub in known_keys.items()}
    (folder / "objects").mkdir(parents=True)
    (folder / "vault.cbor").write_bytes(cbor2.dumps(meta, canonical=True))
    return RefVault(folder, ident, keks)


def ref_object(s: Spec) -> amem.objects.MemoryObject:
    return amem.objects.MemoryObject(content=s.content, mem_type=s.type, confidence=s.confidence,
                                     tags=list(s.tags), created=s.created)


def close(v: UnlockedVault) -> None:
    if v.ident is not None:
        v.lock()


def carries_metadata_signature(path: Path) -> bool:
    """ownmem's key 5 is in the file the reference is about to read."""
    top = cbor2.loads(path.read_bytes())
    return isinstance(top.get(5), bytes) and set(top) == {1, 2, 3, 4, 5}


# ------------------------------------------------------------------ ownmem -> reference


@pytest.mark.slow
def test_reference_opens_every_ownmem_memory_as_self(tmp_path: Path, ref_kdf_memo: None) -> None:
    specs = corpus()
    v = Vault.create(tmp_path / "ownmem", PW)
    try:
        for name in SCOPES[1:]:
            v.add_scope(name)
        expected = {}
        for s in specs:
            oid = v.add(s.content, tags=s.tags, mem_type=MemType.parse(s.type), confidence=s.confidence,
                        scope=s.scope, now=s.created)
            expected[oid.hex()] = s
        owner_kid = v.identity.key_id.hex()
        export_vault(v, tmp_path / "ownmem.amem")
    finally:
        close(v)
    assert carries_metadata_signature(tmp_path / "ownmem.amem")

    amem.vault.Vault.import_file(tmp_path / "ownmem.amem", tmp_path / "ref", PW)
    opened = ref_open_all(tmp_path / "ref")
    assert set(opened) == set(expected)
    mismatches = []
    for hid, s in expected.items():
        o = opened[hid]
        got = (o["content"], tuple(o["tags"]), o["confidence"], o["type"], o["created"], o["scope"],
               o["trust"], o["signature_verified"], o["custody"], o["provenance"]["author_key_id"],
               o["provenance"]["authorship"])
        want = (s.content, s.tags, s.confidence, s.type, s.created, s.scope, "self", True, None, owner_kid,
                "signed")
        if got != want:
            mismatches.append((hid, got, want))
    assert mismatches == []


# ------------------------------------------------------------------ reference -> ownmem


@pytest.mark.slow
def test_ownmem_opens_every_reference_memory_as_self(tmp_path: Path, ref_kdf_memo: None) -> None:
    specs = corpus()
    rv = ref_vault(tmp_path / "ref", SCOPES)
    expected = {rv.seal(ref_object(s), s.scope): s for s in specs}
    # the reference recognises its own vault (a sample: the whole recall is the other test's job)
    sample = sorted(expected)[:5]
    for oid in sample:
        assert amem.vault.Vault(rv.folder).open_object(oid, PW)["trust"] == "self"
    assert amem.vault.Vault(rv.folder).export(tmp_path / "ref.amem") == N

    report, v = import_file(tmp_path / "ownmem", tmp_path / "ref.amem", PW)
    try:
        assert report.identity_adopted and not report.metadata_signed
        assert (report.imported, report.refused, report.skipped) == (N, [], [])
        assert sorted(report.scopes_added) == sorted(SCOPES)
        listing = v.open_all()
        assert listing.refused == []
        owner_kid = v.identity.key_id
        by_id = {e.id.hex(): e for e in listing.entries}
        assert set(by_id) == set(expected)
        mismatches = []
        for oid, s in expected.items():
            e = by_id[oid]
            o = e.opened
            got = (o.content, o.tags, o.confidence, o.type_name, o.created, e.scope, o.trust, o.authorship,
                   o.author_key_id, o.custody_present, o.schema_violations)
            want = (s.content, s.tags, s.confidence, s.type, s.created, s.scope, Trust.SELF, Authorship.SIGNED,
                    owner_kid, False, ())
            if got != want:
                mismatches.append((oid, got, want))
        assert mismatches == []
    finally:
        close(v)


# ------------------------------------------------------------------ keyring and custody across the border


@pytest.fixture(scope="module")
def third_party() -> amem.keys.Identity:
    return amem.keys.Identity.from_master(b"\x33" * 32)


def test_reference_attested_object_opens_as_in_the_reference_only_with_its_keys(
        tmp_path: Path, ref_kdf_memo: None, third_party: amem.keys.Identity) -> None:
    tp_kid = third_party.author_key_id
    rv = ref_vault(tmp_path / "ref", [DEFAULT_SCOPE], known_keys={tp_kid: third_party.sign_pub})
    own = rv.seal(amem.objects.MemoryObject(content="mine", created=1700000000), DEFAULT_SCOPE)
    # what the reference's migrate writes for an ATTRIBUTE outcome: owner-signed, custody names the author
    attested = rv.seal(amem.objects.MemoryObject(
        content="fact authored by a third party", created=1700000001,
        custody={1: 1, 2: tp_kid, 3: 1700000002, 4: tp_kid}), DEFAULT_SCOPE)
    by_friend = rv.seal(amem.objects.MemoryObject(content="the friend's own note", created=1700000003),
                        DEFAULT_SCOPE, signer=third_party)
    ref = ref_open_all(rv.folder)
    assert (ref[own]["trust"], ref[own]["provenance"]["authorship"]) == ("self", "signed")
    assert (ref[attested]["trust"], ref[attested]["provenance"]["authorship"],
            ref[attested]["provenance"]["author_key_id"]) == ("trusted", "attested", tp_kid.hex())
    assert (ref[by_friend]["trust"], ref[by_friend]["provenance"]["authorship"]) == ("trusted", "signed")
    amem.vault.Vault(rv.folder).export(tmp_path / "ref.amem")

    # default: the unsigned container's known_keys are held back; nothing is trusted on its say-so
    report, v = import_file(tmp_path / "held", tmp_path / "ref.amem", PW)
    try:
        assert report.keys_held_back == [tp_kid.hex()] and report.keys_added == []
        # authentic under the file's key, which this vault does not accept (yet): kept sealed,
        # hidden as unverified, and trusted once the key is accepted, with no re-import (§8.2)
        assert report.refused == [] and report.kept_unverified == [(by_friend, tp_kid.hex())]
        assert by_friend not in {e.id.hex() for e in v.open_all().entries}
        by_id = {e.id.hex(): e.opened for e in v.open_all().entries}
        assert by_id[own].trust is Trust.SELF
        a = by_id[attested]
        assert (a.trust, a.authorship, a.author_key_id) == (Trust.UNVERIFIED, Authorship.UNKNOWN, None)
        assert a.claimed_author_key_id == tp_kid
        # accepting the key later, by the owner's own act, restores the attestation at read time
        v.trust_add(third_party.sign_pub)
        assert v.resolve(attested).opened.trust is Trust.TRUSTED
        friend = v.resolve(by_friend).opened
        assert (friend.trust, friend.content) == (Trust.TRUSTED, "the friend's own note")
    finally:
        close(v)

    # opt-in: the same file opens exactly as the reference opened it
    report, v = import_file(tmp_path / "accepted", tmp_path / "ref.amem", PW, accept_container_keys=True)
    try:
        assert report.keys_added == [tp_kid.hex()] and report.keys_held_back == []
        assert report.refused == [] and report.imported == 3
        by_id = {e.id.hex(): e.opened for e in v.open_all().entries}
        for oid in (own, attested, by_friend):
            o, r = by_id[oid], ref[oid]
            assert (o.trust.value, o.authorship.value, o.author_key_id.hex() if o.author_key_id else None,
                    o.content) == (r["trust"], r["provenance"]["authorship"], r["provenance"]["author_key_id"],
                                   r["content"])
        a = by_id[attested]
        assert a.signer_key_id == rv.ident.author_key_id
        assert a.custody == Custody(1, tp_kid, 1700000002, tp_kid)
    finally:
        close(v)


def test_reference_reads_ownmem_export_with_metadata_signature(tmp_path: Path, ref_kdf_memo: None) -> None:
    friend = run_sync(K.signing_key(provider(), b"\x44" * 32))
    v = Vault.create(tmp_path / "ownmem", PW)
    try:
        v.trust_add(friend.public)
        own = v.add("my own", tags=("a",), now=1700000000)
        scope = v.scope(DEFAULT_SCOPE)
        by_friend = v._seal_into(Memory(content="the friend's note", created=1700000001), scope,
                                 signer=friend).object_id
        attested = v._seal_into(Memory(content="attested", created=1700000002,
                                       custody=Custody(1, friend.key_id, 1700000003, friend.key_id)),
                                scope).object_id
        export_vault(v, tmp_path / "o.amem")
    finally:
        close(v)
    top = cbor2.loads((tmp_path / "o.amem").read_bytes())
    assert isinstance(top[5], bytes) and len(top[5]) == 64          # ownmem's metadata signature
    assert top[2]["known_keys"] == {friend.key_id.hex(): friend.public}

    assert amem.vault.Vault.import_file(tmp_path / "o.amem", tmp_path / "ref", PW) is not None
    ref = ref_open_all(tmp_path / "ref")
    assert (ref[own.hex()]["trust"], ref[own.hex()]["tags"]) == ("self", ["a"])
    assert (ref[by_friend.hex()]["trust"], ref[by_friend.hex()]["provenance"]["author_key_id"]) == (
        "trusted", friend.key_id.hex())
    assert (ref[attested.hex()]["trust"], ref[attested.hex()]["provenance"]["authorship"],
            ref[attested.hex()]["provenance"]["author_key_id"]) == ("trusted", "attested", friend.key_id.hex())

    # and the reference's re-export of it comes back into ownmem intact (unsigned now)
    amem.vault.Vault(tmp_path / "ref").export(tmp_path / "back.amem")
    report, u = import_file(tmp_path / "back", tmp_path / "back.amem", PW, accept_container_keys=True)
    try:
        assert report.imported == 3 and report.refused == [] and not report.metadata_signed
        trusts = {e.id: e.opened.trust for e in u.open_all().entries}
        assert trusts == {own: Trust.SELF, by_friend: Trust.TRUSTED, attested: Trust.TRUSTED}
    finally:
        close(u)
