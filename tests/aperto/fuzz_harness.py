"""Seeded fuzz harness for ``open_sealed`` and ``parse_container`` (STYLE.md habits 5, 7, 11).

The contract under test: every input either opens or raises an ``OwnmemError``
subclass.  Any other exception escaping ownmem is a bug (a crash an attacker can
trigger with one file), and so is an object that opens with a trust it cannot
prove, so the harness checks the trust invariants of draft-02 §6/§7 on every
object that opens.

Inputs are mutations of valid objects at every layer an attacker can reach:

    sealed    the sealed-object bytes, as the storage server holds them
    encrypt0  the COSE_Encrypt0 inside a valid envelope (still no DEK)
    signed    the COSE_Sign1, re-encrypted under the DEK (a DEK holder; no signing key)
    payload   the memory-payload, re-signed by its signer (a signer writing garbage)
    random    random bytes
    container a small valid .amem (``ownmem.aperto.container``), mutated, then read
              the way an importer does: parse, check the metadata signature, unwrap
              each object's keys and open it

Mutations: bit flips, interesting bytes, inserts, deletes, truncations, chunk
duplication and splices with other valid inputs, alone or stacked.

    run_fuzz(cases, seed) -> dict    counts by outcome; "unhandled" and
                                     "invariant_violations" must both be 0

Run it directly for a long campaign:  python tests/aperto/fuzz_harness.py 100000 1
"""
from __future__ import annotations

import random
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ownmem.aperto import container as container_mod, keys, seal as seal_mod
from ownmem.aperto.keys import Identity
from ownmem.aperto.model import Authorship, Custody, Memory, OpenedMemory, Trust
from ownmem.aperto.trust import Keyring
from ownmem.crypto import cbor, cose, provider, run_sync, sha256
from ownmem.errors import MalformedInput, OwnmemError

P = provider()
SCOPE_ID = bytes(range(1, 17))
MAX_EXAMPLES = 5
MAX_CONTAINER_OBJECTS = 16

INTERESTING = (0x00, 0x01, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1F, 0x20, 0x40, 0x41, 0x50,
               0x58, 0x5B, 0x5F, 0x60, 0x7F, 0x80, 0x81, 0x9B, 0x9F, 0xA0, 0xA1, 0xBB, 0xBF,
               0xC0, 0xD0, 0xD2, 0xD8, 0xF4, 0xF5, 0xF6, 0xF7, 0xF9, 0xFA, 0xFB, 0xFF)


# ---------------------------------------------------------------- corpus

@dataclass(frozen=True)
class Seed:
    kind: str
    sealed: bytes
    dek: bytes
    object_id: bytes
    version: int
    sign1: bytes        # the decrypted COSE_Sign1
    payload: bytes
    signer: Identity
    kid: bytes


@dataclass(frozen=True)
class Corpus:
    owner: Identity
    alice: Identity
    keyring: Keyring
    seeds: tuple[Seed, ...]
    genuine: frozenset[tuple[bytes, bytes]]      # (payload, signer key id) pairs we signed
    container: bytes | None


def _identity(name: str) -> Identity:
    return run_sync(keys.identity_from_master(P, sha256(b"fuzz identity " + name.encode())))


def _aad(version: int, object_id: bytes) -> bytes:
    return seal_mod.envelope_aad(version, object_id, SCOPE_ID) if version >= 2 else b""


def _seed(kind: str, n: int, signer: Identity, *, memory: Memory | None = None,
          payload: dict[int, Any] | None = None, version: int = 2) -> Seed:
    oid = bytes([n]) * 16
    dek = sha256(b"fuzz dek " + kind.encode())
    nonce = sha256(b"fuzz nonce " + kind.encode())[:12]
    if memory is not None:
        so = run_sync(seal_mod.seal(P, memory, signer=signer.sign, scope_id=SCOPE_ID, dek=dek,
                                    object_id=oid, nonce=nonce))
    else:
        assert payload is not None
        so = run_sync(seal_mod.seal_unchecked(P, cbor.encode(payload), signer=signer.sign,
                                              kid=signer.key_id, object_id=oid, scope_id=SCOPE_ID,
                                              dek=dek, nonce=nonce, format_version=version))
    enc = cose.parse_encrypt0(so.encrypt0)
    sign1 = run_sync(cose.decrypt0(P, dek, enc, _aad(version, oid)))
    return Seed(kind, so.encoded, dek, oid, version, sign1, cose.parse_sign1(sign1).payload,
                signer, signer.key_id)


def build_corpus() -> Corpus:
    owner, alice = _identity("owner"), _identity("alice")
    now = 1750000000
    raw_payload = {1: 2, 2: "legacy", 3: 0.9, 4: {1: "fuzz/1", 2: owner.key_id}, 5: 1, 7: {1: now}}
    seeds = (
        _seed("plain", 1, owner, memory=Memory("a plain memory", created=now)),
        _seed("rich", 2, owner, memory=Memory(
            "a rich memory", mem_type=1, confidence=1.0, tags=("a", "b"), created=now,
            updated=now + 1, session="s-1", extensions={"uomp": {"v": 1}, "supersedes": [b"x" * 16]},
            preserved={99: cbor.Raw(bytes.fromhex("a202190000011800"))})),
        _seed("third-party", 3, alice, memory=Memory("alice wrote this", created=now)),
        _seed("custody-attested", 4, owner, memory=Memory(
            "migrated", created=now, custody=Custody(1, alice.key_id, now, alice.key_id))),
        _seed("custody-unproven", 5, owner, memory=Memory(
            "quarantined", created=now, custody=Custody(1, alice.key_id, now, None))),
        _seed("v1", 6, owner, payload=raw_payload, version=1),
        _seed("out-of-range", 7, owner, payload={**raw_payload, 3: 42.0, 20: {}}),
    )
    keyring = Keyring(owner.sign_pub, {alice.key_id: alice.sign_pub})
    genuine = frozenset((s.payload, s.kid) for s in seeds)
    return Corpus(owner, alice, keyring, seeds, genuine, _build_container(owner, alice, seeds))


def _build_container(owner: Identity, alice: Identity, seeds: tuple[Seed, ...]) -> bytes:
    # containers are fuzzed through ownmem.aperto.container.build_container / parse_container
    kek = sha256(b"fuzz kek")
    wrapped = run_sync(keys.wrap_kek(P, kek, owner.ka_pub, SCOPE_ID, eph_seed=sha256(b"fuzz eph")))
    meta = container_mod.VaultPublic(
        salt=bytes(16), sign_pub=owner.sign_pub, ka_pub=owner.ka_pub,
        scopes={"default": container_mod.ScopeEntry("default", SCOPE_ID, wrapped)},
        known_keys={alice.key_id: alice.sign_pub})
    objects = [(s.object_id, s.sealed, run_sync(keys.wrap_dek(P, s.dek, kek))) for s in seeds]
    signature = run_sync(container_mod.sign_metadata(P, owner, meta))
    return container_mod.build_container(meta, objects, signature)


# ---------------------------------------------------------------- mutation

class Mutator:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def _pos(self, data: bytes) -> int:
        return self.rng.randrange(len(data) + 1)

    def bitflip(self, data: bytes, pool: list[bytes]) -> bytes:
        if not data:
            return data
        b = bytearray(data)
        for _ in range(self.rng.randint(1, 4)):
            i = self.rng.randrange(len(b))
            b[i] ^= 1 << self.rng.randrange(8)
        return bytes(b)

    def byte(self, data: bytes, pool: list[bytes]) -> bytes:
        if not data:
            return data
        b = bytearray(data)
        b[self.rng.randrange(len(b))] = (self.rng.choice(INTERESTING) if self.rng.random() < 0.7
                                         else self.rng.randrange(256))
        return bytes(b)

    def insert(self, data: bytes, pool: list[bytes]) -> bytes:
        i = self._pos(data)
        return data[:i] + self.rng.randbytes(self.rng.randint(1, 8)) + data[i:]

    def delete(self, data: bytes, pool: list[bytes]) -> bytes:
        i = self._pos(data)
        return data[:i] + data[i + self.rng.randint(1, 8):]

    def truncate(self, data: bytes, pool: list[bytes]) -> bytes:
        return data[:self.rng.randrange(len(data))] if data else data

    def duplicate(self, data: bytes, pool: list[bytes]) -> bytes:
        i, j = sorted((self._pos(data), self._pos(data)))
        k = self._pos(data)
        return data[:k] + data[i:j] + data[k:]

    def splice(self, data: bytes, pool: list[bytes]) -> bytes:
        other = self.rng.choice(pool)
        return data[:self._pos(data)] + other[self.rng.randrange(len(other) + 1):]

    def mutate(self, data: bytes, pool: list[bytes]) -> tuple[str, bytes]:
        ops: list[Callable[[bytes, list[bytes]], bytes]] = [
            self.bitflip, self.byte, self.insert, self.delete, self.truncate, self.duplicate,
            self.splice]
        if self.rng.random() < 0.25:
            chosen = [self.rng.choice(ops) for _ in range(self.rng.randint(2, 4))]
        else:
            chosen = [self.rng.choice(ops)]
        for op in chosen:
            data = op(data, pool)
        return "+".join(op.__name__ for op in chosen), data


# ---------------------------------------------------------------- one case

class InvariantViolation(Exception):
    """An object opened with a trust or authorship it cannot prove."""


def _check_invariants(o: OpenedMemory, corpus: Corpus, *, allow_unverified: bool,
                      no_signing_key: bool) -> None:
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise InvariantViolation(what)

    owner_kid = corpus.owner.key_id
    accepted = set(corpus.keyring.accepted) | {owner_kid}
    need(o.confidence is None or 0.0 <= o.confidence <= 1.0, "confidence out of range propagated")
    if not o.signature_verified:
        need(allow_unverified, "unauthenticated object returned without the opt-in")
        need(o.trust is Trust.UNVERIFIED, "unauthenticated object not labelled unverified")
    if o.authorship is Authorship.UNKNOWN:
        need(o.author_key_id is None, "unknown authorship reports an author")
        need(o.trust is Trust.UNVERIFIED, "unknown authorship is not unverified")
    if o.trust is Trust.SELF:
        need(o.signature_verified and o.signer_key_id == owner_kid, "self without the owner's signature")
        need(not o.custody_present, "custody object resolved to self")
        need(o.authorship is Authorship.SIGNED and o.author_key_id == owner_kid, "self misattributed")
    if o.trust is Trust.TRUSTED:
        need(o.signature_verified, "trusted without a signature")
        need(o.author_key_id in accepted, "trusted author not accepted")
        if o.authorship is Authorship.ATTESTED:
            need(o.signer_key_id == owner_kid, "custody attested by a non-owner")
            need(o.custody is not None and o.custody.proven_author == o.author_key_id,
                 "attested author is not the proven author")
        else:
            need(o.authorship is Authorship.SIGNED and o.author_key_id == o.signer_key_id,
                 "trusted author is not the signer")
    if no_signing_key:
        # An attacker without a signing key cannot make anything verify that we did not sign.
        if o.signature_verified:
            need((o.payload, o.signer_key_id) in corpus.genuine, "forged signature verified")


def _open_case(layer: str, seed: Seed, data: bytes, corpus: Corpus, rng: random.Random) -> str:
    """Build the bytes for one layer, open them; return the outcome name."""
    if layer == "encrypt0":
        env = cbor.decode(seed.sealed)
        env[4] = data
        sealed = cbor.encode(env)
    elif layer == "signed":
        enc = run_sync(cose.encrypt0(P, seed.dek, bytes(12), data, _aad(seed.version, seed.object_id)))
        env = cbor.decode(seed.sealed)
        env[4] = enc
        sealed = cbor.encode(env)
    elif layer == "payload":
        sealed = run_sync(seal_mod.seal_unchecked(
            P, data, signer=seed.signer.sign, kid=seed.kid, object_id=seed.object_id,
            scope_id=SCOPE_ID, dek=seed.dek, nonce=bytes(12), format_version=seed.version)).encoded
    else:
        sealed = data
    allow = rng.random() < 0.5
    try:
        opened = seal_mod.open_sealed(P, sealed, seed.dek, corpus.keyring, allow_unverified=allow)
        o = run_sync(opened)
    except OwnmemError as e:
        return type(e).__name__
    _check_invariants(o, corpus, allow_unverified=allow, no_signing_key=layer != "payload")
    return "opened"


def _container_case(data: bytes, corpus: Corpus) -> tuple[str, Counter[str]]:
    """Read a container the way an importer does; one bad object never sinks the rest."""
    assert container_mod is not None
    per_object: Counter[str] = Counter()
    try:
        c = container_mod.parse_container(data)
    except OwnmemError as e:
        return type(e).__name__, per_object
    run_sync(container_mod.metadata_signature_valid(P, c, corpus.owner.sign_pub))
    for obj in c.objects[:MAX_CONTAINER_OBJECTS]:
        try:
            if not isinstance(obj, bytes):
                raise MalformedInput("container object is not a byte string")
            so = seal_mod.parse_sealed(obj)
            scope = c.meta.scope_by_id(so.scope_id)
            wrapped_dek = c.deks.get(so.object_id)
            if scope is None or wrapped_dek is None:
                per_object["no key"] += 1
                continue
            kek = run_sync(keys.unwrap_kek(P, scope.wrapped, scope.scope_id, corpus.owner))
            dek = run_sync(keys.unwrap_dek(P, wrapped_dek, kek))
            o = run_sync(seal_mod.open_sealed(P, so, dek, corpus.keyring, allow_unverified=True))
        except OwnmemError as e:
            per_object[type(e).__name__] += 1
            continue
        _check_invariants(o, corpus, allow_unverified=True, no_signing_key=True)
        per_object["opened"] += 1
    return "parsed", per_object


# ---------------------------------------------------------------- the run

def run_fuzz(cases: int, seed: int) -> dict[str, Any]:
    """Fuzz ``cases`` inputs from ``seed``; deterministic for a given seed and corpus."""
    rng = random.Random(seed)
    corpus = build_corpus()
    mutator = Mutator(rng)
    layers = {
        "sealed": [s.sealed for s in corpus.seeds],
        "encrypt0": [cbor.decode(s.sealed)[4] for s in corpus.seeds],
        "signed": [s.sign1 for s in corpus.seeds],
        "payload": [s.payload for s in corpus.seeds],
    }
    weights = {"sealed": 30, "encrypt0": 15, "signed": 20, "payload": 20, "random": 5,
               "container": 10 if corpus.container is not None else 0}
    names, w = list(weights), list(weights.values())

    outcomes: dict[str, Counter[str]] = {name: Counter() for name in names}
    container_objects: Counter[str] = Counter()
    unhandled = 0
    violations = 0
    examples: list[str] = []

    for case in range(cases):
        layer = rng.choices(names, w)[0]
        s = rng.choice(corpus.seeds)
        if layer == "random":
            op, data = "random", rng.randbytes(rng.randrange(512))
            if rng.random() < 0.5:      # look like a sealed object for the first bytes
                data = b"\xa4\x01\x50" + data
        elif layer == "container":
            assert corpus.container is not None
            op, data = mutator.mutate(corpus.container, [corpus.container] + layers["sealed"])
        else:
            pool = layers[layer]
            op, data = mutator.mutate(pool[corpus.seeds.index(s)], pool)
        try:
            if layer == "container":
                outcome, per_object = _container_case(data, corpus)
                container_objects.update(per_object)
            else:
                outcome = _open_case("sealed" if layer == "random" else layer, s, data, corpus, rng)
            outcomes[layer][outcome] += 1
        except InvariantViolation as e:
            violations += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append(f"case {case} {layer}/{s.kind}/{op}: invariant: {e}; "
                                f"input {data.hex()}")
        except Exception as e:  # noqa: BLE001 - the point: anything but OwnmemError is a bug
            unhandled += 1
            if len(examples) < MAX_EXAMPLES:
                where = traceback.extract_tb(e.__traceback__)[-1]
                examples.append(f"case {case} {layer}/{s.kind}/{op}: {type(e).__name__}: {e} "
                                f"at {where.filename}:{where.lineno}; input {data.hex()}")

    report: dict[str, Any] = {"cases": cases, "seed": seed}
    for layer in names:
        if outcomes[layer]:
            report[f"outcomes_{layer}"] = dict(sorted(outcomes[layer].items()))
    if corpus.container is not None:
        report["container_objects"] = dict(sorted(container_objects.items()))
    else:
        report["containers"] = "not fuzzed: ownmem.aperto.container is absent"
    report["unhandled"] = unhandled
    report["invariant_violations"] = violations
    report["examples"] = examples
    return report


def total_outcomes(report: dict[str, Any]) -> Counter[str]:
    """All layers' outcomes added up."""
    total: Counter[str] = Counter()
    for k, v in report.items():
        if k.startswith("outcomes_"):
            total.update(v)
    return total


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    sd = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    result = run_fuzz(n, sd)
    for key, value in result.items():
        print(f"{key}: {value}")
    sys.exit(1 if result["unhandled"] or result["invariant_violations"] else 0)
