"""The unlocked vault that does the work, and its memories as listed (``Entry``, ``Listing``).

    Vault.create(folder, passphrase)  -> UnlockedVault   (new identity, scope "default")
    Vault(folder).unlock(passphrase)  -> UnlockedVault   (Argon2id runs here, once)

(``Vault``, creating and unlocking: ownmem.vault.unlock.)

An ``UnlockedVault`` holds the derived identity and the scope KEKs it has unwrapped,
so no operation re-derives from the passphrase (the reference does, per call).
``lock()`` drops every key it holds; ``close()`` locks and closes the store.

Memories are immutable (DESIGN.md "Objects are immutable"): ``edit`` seals a new
object naming the one it supersedes (payload extension "supersedes"); the state of a
memory is the head of its chain, and two heads of one chain are a conflict shown to
the person, never a lost write.  ``forget`` erases every version.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ownmem.aperto import keys as aperto_keys
from ownmem.aperto.container import ScopeEntry, VaultPublic
from ownmem.aperto.keys import WrappedKek
from ownmem.aperto.model import Memory, OpenedMemory, SealedObject, Trust, type_name
from ownmem.aperto.seal import open_many, open_sealed, parse_sealed, reopen_verified, seal
from ownmem.aperto.trust import Keyring
from ownmem.crypto import CryptoProvider, cbor, random_bytes, run_sync
from ownmem.errors import AuthenticationFailed, MalformedInput, NotFound, OwnmemError, VaultError
from ownmem.purposes import KeyPurpose, Purpose
from ownmem.recall.ranking import Doc, Ranking
from ownmem.saihm.identity import Holder, holder_from_master
from ownmem.saihm.receipt import make_receipt
from ownmem.uomp.items import search_label
from ownmem.vault import rekey, slots
from ownmem.vault.devicekey import note_keys_changed
from ownmem.vault.store import PublicIdentity, Store, StoredObject

DEFAULT_SCOPE = "default"
SUPERSEDES = "supersedes"
MERGES = "merges"
TOOL = "ownmem/0.1"
SYNC_INFO = Purpose.SYNC
OPEN_BATCH = 512

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Entry:
    """One opened memory as the vault knows it."""

    opened: OpenedMemory
    scope: str
    supersedes: bytes | None
    superseded_by: tuple[bytes, ...]
    merges: tuple[bytes, ...] = ()       # other heads this version settled (a resolved conflict)

    @property
    def id(self) -> bytes:
        return self.opened.object_id

    @property
    def is_head(self) -> bool:
        return not self.superseded_by

    def to_json(self) -> dict[str, Any]:
        """The JSON view of a listed memory that the CLI (``--json``) and the PWA both show:
        hex for bytes, never key material."""
        o = self.opened
        uomp = o.extensions.get("uomp")
        return {"id": o.object_id.hex(), "content": o.content, "tags": list(o.tags), "type": type_name(o.mem_type),
                "confidence": o.confidence, "scope": self.scope, "trust": o.trust.value,
                "authorship": o.authorship.value, "author_key_id": o.author_key_id.hex() if o.author_key_id else None,
                "created": o.created, "updated": o.updated,
                "supersedes": self.supersedes.hex() if self.supersedes else None,
                "superseded_by": [s.hex() for s in self.superseded_by],
                "source": uomp.get("source") if isinstance(uomp, dict) else None,
                "schema_violations": list(o.schema_violations)}


@dataclass(frozen=True, slots=True)
class Listing:
    entries: list[Entry]
    refused: list[tuple[bytes, str]]     # objects that did not open, and why (never silent, §8.3 "The AI Boundary")
    # (successor, the version it names, why) for edit links not honoured: the object still
    # lists as a memory of its own, but hides and erases nothing of another author's
    ignored_links: list[tuple[bytes, bytes, str]] = field(default_factory=list)

    def heads(self) -> list[Entry]:
        return [e for e in self.entries if e.is_head]

    def conflicts(self) -> list[list[Entry]]:
        """Groups of heads that edit the same memory concurrently."""
        by_id = {e.id: e for e in self.entries}
        groups: dict[bytes, list[Entry]] = {}
        for e in self.entries:
            if len(e.superseded_by) > 1:
                heads = [h for h in self._heads_below(e, by_id)]
                if len(heads) > 1:
                    groups[e.id] = heads
        return list(groups.values())

    @staticmethod
    def _heads_below(e: Entry, by_id: dict[bytes, Entry]) -> list[Entry]:
        out, stack, seen = [], [e], set()
        while stack:
            cur = stack.pop()
            if cur.id in seen:
                continue
            seen.add(cur.id)
            if cur.is_head:
                out.append(cur)
            stack.extend(by_id[s] for s in cur.superseded_by if s in by_id)
        return sorted(out, key=lambda x: x.id)


class VerifiedCache(Protocol):
    """Verified plaintext kept by a device (encrypted at rest by its owner, e.g. the browser's
    device-cache), so that a later unlock need not verify every signature again."""

    def get(self, oid: bytes, sealed: bytes) -> tuple[bytes, bytes] | None: ...   # (payload, signer public key)

    def put(self, oid: bytes, sealed: bytes, payload: bytes, signer_pub: bytes) -> None: ...


def _supersedes(o: OpenedMemory) -> bytes | None:
    v = o.extensions.get(SUPERSEDES)
    return v if isinstance(v, bytes) and len(v) == 16 else None


def link_honoured(successor: OpenedMemory, parent: OpenedMemory) -> str | None:
    """Whether an edit link (``supersedes`` / ``merges``) from ``successor`` to ``parent``
    counts, or why not.  A link hides the parent from the list and makes ``forget`` of
    the successor erase it, so only the parent's own author, or the vault owner, may
    make one: any key the keyring accepts could otherwise hide and destroy the owner's
    memories (ApertoMemory "Trust Derivation": authorship is derived, never claimed)."""
    if not successor.signature_verified or successor.signer_key_id is None:
        return "the newer version's signature is not verified"
    if successor.trust is Trust.SELF:
        return None
    if parent.signature_verified and parent.signer_key_id == successor.signer_key_id:
        return None
    return "signed by another author than the version it claims to replace"


def honour_links(entries: list[Entry]) -> tuple[list[Entry], list[tuple[bytes, bytes, str]]]:
    """Drop the edit links that ``link_honoured`` refuses and derive ``superseded_by`` from
    the rest.  A link to a version not (yet) present is kept: it hides nothing, and it is
    judged again at every listing once that version arrives."""
    by_id = {e.id: e for e in entries}
    ignored: list[tuple[bytes, bytes, str]] = []
    kept: list[Entry] = []
    for e in entries:
        def counts(parent: bytes, e: Entry = e) -> bool:
            p = by_id.get(parent)
            why = None if p is None else link_honoured(e.opened, p.opened)
            if why is not None:
                ignored.append((e.id, parent, why))
            return why is None
        sup = e.supersedes if e.supersedes is not None and counts(e.supersedes) else None
        kept.append(replace(e, supersedes=sup, merges=tuple(m for m in e.merges if counts(m))))
    succ: dict[bytes, list[bytes]] = {}
    for e in kept:
        for parent in ((e.supersedes,) if e.supersedes is not None else ()) + e.merges:
            succ.setdefault(parent, []).append(e.id)
    return [replace(e, superseded_by=tuple(sorted(succ.get(e.id, ())))) for e in kept], ignored


def _entry(o: OpenedMemory, scope: str) -> Entry:
    m = o.extensions.get(MERGES)
    merges = tuple(x for x in m if isinstance(x, bytes) and len(x) == 16) if isinstance(m, list) else ()
    return Entry(o, scope, _supersedes(o), (), merges)


class UnlockedVault:
    """An unlocked vault: the store and every secret derived from the passphrase.

    Each secret is one attribute that ``lock()`` drops (tests/vault/test_lock.py checks
    every attribute of a locked vault, so a new one must be dropped there too)."""

    def __init__(self, store: Store, ident: aperto_keys.Identity, crypto: CryptoProvider) -> None:
        self._store = store
        self.crypto = crypto
        # the secrets, each dropped by lock()
        self.ident: aperto_keys.Identity | None = ident           # master secret, owner signing and key-agreement keys
        self._keks: dict[bytes, bytes] = {}             # scope_id -> unwrapped scope KEK
        # scope_id -> the wrap each cached KEK came from: a scope rotated by another process
        # (vault/rotate.py) has another wrap in the store, and its new KEK is unwrapped then
        self._kek_wraps: dict[bytes, WrappedKek] = {}
        self._holder: Holder | None = None              # SAIHM holder: the ML-DSA-65 seed
        self._sync: aperto_keys.SigningKey | None = None          # the device-authentication key
        self._purpose: dict[KeyPurpose, bytes] = {}     # purpose -> its key (device cache, ...)

    # ------------------------------------------------------------- keys
    @property
    def identity(self) -> aperto_keys.Identity:
        if self.ident is None:
            raise VaultError("the vault is locked")
        return self.ident

    @property
    def store(self) -> Store:
        # A locked vault answers with the clean "locked" error, not with what the store says
        # (after close(), sqlite3.ProgrammingError).
        if self.ident is None:
            raise VaultError("the vault is locked")
        return self._store

    def lock(self) -> None:
        """Drop every secret this object holds and have the provider forget the private keys
        it cached.  The store stays open, for a caller that unlocks on it again (the PWA);
        ``close()`` closes it too.  Python cannot wipe bytes in place: dropping every
        reference is what a lock can do (accepted risk, as in every Python crypto library)."""
        self.ident = None
        self._keks.clear()
        self._kek_wraps.clear()
        self._holder = None
        self._sync = None
        self._purpose.clear()
        self.crypto.forget_secrets()

    def close(self) -> None:
        """Lock, and close the store: this object is done with the vault."""
        self.lock()
        self._store.close()

    def holder(self) -> Holder:
        """The SAIHM holder identity (ML-DSA-65), derived from the master secret on first use."""
        if self._holder is None:
            self._holder = run_sync(holder_from_master(self.crypto, self.identity.root))
        return self._holder

    def purpose_key(self, purpose: KeyPurpose) -> bytes:
        """The 32-byte key of one ownmem purpose (ownmem.purposes), derived on first use."""
        key = self._purpose.get(purpose)
        return key if key is not None else run_sync(self.purpose_key_async(purpose))

    async def purpose_key_async(self, purpose: KeyPurpose) -> bytes:
        key = self._purpose.get(purpose)
        if key is None:
            key = await aperto_keys.derive_purpose_key(self.crypto, self.identity.root, purpose)
            self._purpose[purpose] = key
        return key

    def sync_key(self) -> aperto_keys.SigningKey:
        """The Ed25519 key that authenticates this vault's devices to the blind server."""
        if self._sync is None:
            self._sync = run_sync(aperto_keys.signing_key(self.crypto, self.purpose_key(SYNC_INFO)))
        return self._sync

    def keyring(self) -> Keyring:
        return Keyring(self.identity.sign_pub, self.store.known_keys(), self.superseded())

    def successions(self) -> list[rekey.Succession]:
        """The owner-key succession records this device holds, oldest first (vault/rekey.py)."""
        raw = self.store.successions()
        try:
            return [] if raw is None else [rekey.parse_succession(r) for r in cbor.decode(raw)]
        except (MalformedInput, TypeError, ValueError):
            raise VaultError("this vault's record of its earlier owner keys is damaged") from None

    def superseded(self, owner_pub: bytes | None = None) -> dict[bytes, bytes]:
        """The owner's earlier signing keys {key_id: public}, verify-only (a passphrase change:
        vault/rekey.py); a record that does not verify or chain to the owner key counts for nothing."""
        recs = self.successions()
        if not recs:
            return {}
        if not all(run_sync(rekey.succession_valid(self.crypto, r)) for r in recs):
            raise VaultError("a record of this vault's earlier owner keys does not verify")
        chain = rekey.chain_to(recs, owner_pub if owner_pub is not None else self.identity.sign_pub)
        if chain is None:
            raise VaultError("the records of this vault's earlier owner keys do not lead to its key")
        return chain

    def change_passphrase(self, new_passphrase: str, *,
                          publish: Callable[[rekey.Rekeyed], None] | None = None) -> rekey.Rekeyed:
        """New salt and Argon2id, the owner keys that follow from them, every scope's KEK
        re-wrapped and a fresh KEK per scope for what is written afterwards (vault/rekey.py);
        one transaction, no object touched.  ``publish`` runs inside it, once the store holds
        the new keys (the sync server is told there): if it raises, nothing changed here.  The
        vault stays unlocked, under the new keys."""
        return run_sync(self.change_passphrase_async(new_passphrase, publish=publish))

    async def change_passphrase_async(self, new_passphrase: str, *, salt: bytes | None = None,
                                      master: bytes | None = None,
                                      publish: Callable[[rekey.Rekeyed], None] | None = None) -> rekey.Rekeyed:
        if not new_passphrase and master is None:
            raise VaultError("the passphrase must not be empty")
        if any(r is not None for _, r in self.store.kek_gens().values()):
            # the retiring KEK is wrapped to today's key-agreement key (vault/rotate.py)
            raise VaultError("a scope rotation is not finished: run `ownmem scope rotate NAME` again first")
        old = self.identity
        salt = salt if salt is not None else random_bytes(aperto_keys.SALT_LEN)
        if master is None:
            master = await aperto_keys.master_from_passphrase(self.crypto, new_passphrase, salt)
        scopes = self.store.scopes()
        keks = {s.scope_id: await self.kek_async(s) for s in scopes.values()}
        done = await rekey.rekey(self.crypto, old, scopes, keks, master, salt)
        recs = [r.encode() for r in self.successions()]
        # every unlock slot opens the new master (wrapped to its public key: no slot secret needed)
        rewrapped = [await slots.rewrap_slot(self.crypto, s, master) for s in self.store.unlock_slots()]
        with self.store.transaction():
            self.store.replace_identity(PublicIdentity(salt, done.ident.sign_pub, done.ident.ka_pub), done.root_wrap)
            self.store.replace_scopes(done.scopes.values())
            self.store.set_successions(cbor.encode([*recs, done.succession.encode()]))
            self.store.set_unlock_slots(rewrapped)
            note_keys_changed(self.store, int(time.time()))   # agent tokens issued before: revoked
            if publish is not None:
                publish(done)
        self.ident = done.ident
        self._keks = dict(done.keks)
        self._kek_wraps.clear()
        self.crypto.forget_secrets()      # the old owner keys' cached private keys
        return done

    # ------------------------------------------------------------- unlock slots
    def unlock_slots(self) -> list[slots.Slot]:
        """The secrets besides the passphrase that open this vault (vault/slots.py)."""
        return self.store.unlock_slots()

    def add_unlock_slot(self, kind: str, label: str, ref: bytes, secret: bytes, *,
                        now: int | None = None) -> slots.Slot:
        return run_sync(self.add_unlock_slot_async(kind, label, ref, secret, now=now))

    async def add_unlock_slot_async(self, kind: str, label: str, ref: bytes, secret: bytes, *,
                                    now: int | None = None) -> slots.Slot:
        """A slot that opens the current master with ``secret`` (a recovery key, a passkey's PRF
        output); the secret itself is not kept."""
        slot = await slots.make_slot(self.crypto, kind, label, ref, secret, self.identity.master,
                                     int(time.time()) if now is None else now)
        with self.store.transaction():
            self.store.set_unlock_slots([*self.store.unlock_slots(), slot])
        return slot

    def remove_unlock_slot(self, slot_id: bytes) -> None:
        with self.store.transaction():
            held = self.store.unlock_slots()
            kept = [s for s in held if s.slot_id != slot_id]
            if len(kept) == len(held):
                raise NotFound(f"no unlock slot with id {slot_id.hex()}")
            self.store.set_unlock_slots(kept)

    def kek(self, scope: ScopeEntry) -> bytes:
        kek = self._keks.get(scope.scope_id)
        return kek if kek is not None else run_sync(self.kek_async(scope))

    async def kek_async(self, scope: ScopeEntry) -> bytes:
        kek = self._keks.get(scope.scope_id)
        if kek is None or self._kek_wraps.get(scope.scope_id, scope.wrapped) != scope.wrapped:
            kek = await aperto_keys.unwrap_kek(self.crypto, scope.wrapped, scope.scope_id, self.identity)
            self._keks[scope.scope_id] = kek
            self._kek_wraps[scope.scope_id] = scope.wrapped
        return kek

    def forget_kek(self, scope_id: bytes) -> None:
        """Drop the cached KEK of a scope whose KEK changed (vault/rotate.py)."""
        self._keks.pop(scope_id, None)
        self._kek_wraps.pop(scope_id, None)

    def scopes(self) -> dict[str, ScopeEntry]:
        return self.store.scopes()

    def scope(self, name: str) -> ScopeEntry:
        """The scope that takes writes for ``name``: one retired by a passphrase change writes to
        its successor (its KEK may be known to whoever knew the old passphrase)."""
        s = self.store.scopes().get(rekey.current_name(name))
        if s is None:
            raise NotFound(f"no scope named {name!r} (see `ownmem scope list`)")
        return s

    def add_scope(self, name: str) -> ScopeEntry:
        if not name or name in self.store.scopes():
            raise VaultError(f"scope {name!r} already exists" if name else "scope name must not be empty")
        if rekey.is_retired(name):
            raise VaultError(f"a scope name must not contain {rekey.RETIRED_MARK!r} (it marks a scope a "
                             "passphrase change retired)")
        scope_id = random_bytes(16)
        wrapped = run_sync(aperto_keys.wrap_kek(self.crypto, aperto_keys.new_key(), self.identity.ka_pub, scope_id))
        entry = ScopeEntry(name, scope_id, wrapped)
        with self.store.transaction():
            self.store.add_scope(entry)
        return entry

    def public(self) -> VaultPublic:
        pub = self.store.identity()
        assert pub is not None
        # the superseded owner keys travel as accepted author keys: a reader that knows nothing
        # of succession records (the reference) opens what they signed as trusted, not forged
        return VaultPublic(salt=pub.salt, sign_pub=pub.sign_pub, ka_pub=pub.ka_pub,
                           scopes=self.store.scopes(),
                           known_keys={**self.superseded(pub.sign_pub), **self.store.known_keys()})

    # ------------------------------------------------------------- keyring
    def trust_add(self, public: bytes) -> bytes:
        if len(public) != 32:
            raise MalformedInput("an author key is a 32-byte Ed25519 public key (64 hex digits)")
        if public == self.identity.sign_pub:
            raise VaultError("that is this vault's own key; it is always trusted as self")
        kid = aperto_keys.key_id(public)
        with self.store.transaction():
            self.store.add_known_key(kid, public)
            self.store.unrevoke(kid)
        return kid

    def trust_remove(self, kid: bytes) -> None:
        """Revocation: every memory attributed to the key downgrades at the next read, no rewrite."""
        with self.store.transaction():
            if not self.store.remove_known_key(kid):
                raise NotFound(f"no accepted key with id {kid.hex()}")

    # ------------------------------------------------------------- objects
    def _seal_into(self, memory: Memory, scope: ScopeEntry, signer: aperto_keys.SigningKey | None = None,
                   ) -> SealedObject:
        return run_sync(self._seal_into_async(memory, scope, signer))

    async def _seal_into_async(self, memory: Memory, scope: ScopeEntry,
                               signer: aperto_keys.SigningKey | None = None) -> SealedObject:
        dek = aperto_keys.new_key()
        so = await seal(self.crypto, memory, signer=signer or self.identity.sign, scope_id=scope.scope_id, dek=dek)
        wrapped = await aperto_keys.wrap_dek(self.crypto, dek, await self.kek_async(scope))
        with self.store.transaction():
            self.store.put_object(StoredObject(so.object_id, so.scope_id, so.format_version, so.encoded, wrapped))
        return so

    def add(self, content: str, *, tags: Iterable[str] = (), mem_type: int = 2, confidence: float = 0.8,
            scope: str = DEFAULT_SCOPE, now: int | None = None, extensions: dict[str, object] | None = None) -> bytes:
        return run_sync(self.add_async(content, tags=tags, mem_type=mem_type, confidence=confidence, scope=scope,
                                       now=now, extensions=extensions))

    async def add_async(self, content: str, *, tags: Iterable[str] = (), mem_type: int = 2,
                        confidence: float = 0.8, scope: str = DEFAULT_SCOPE, now: int | None = None,
                        extensions: dict[str, object] | None = None) -> bytes:
        memory = Memory(content=content, mem_type=mem_type, confidence=confidence, tags=tuple(tags),
                        created=int(time.time()) if now is None else now, tool=TOOL, extensions=extensions)
        return (await self._seal_into_async(memory, self.scope(scope))).object_id

    def open_stored(self, row: StoredObject, scopes_by_id: dict[bytes, ScopeEntry], keyring: Keyring,
                    *, allow_unverified: bool = False) -> Entry:
        return run_sync(self.open_stored_async(row, scopes_by_id, keyring, allow_unverified=allow_unverified))

    async def open_stored_async(self, row: StoredObject, scopes_by_id: dict[bytes, ScopeEntry], keyring: Keyring,
                                *, allow_unverified: bool = False) -> Entry:
        scope = scopes_by_id.get(row.scope_id)
        if scope is None:
            raise MalformedInput("object in an unknown scope")
        dek = await aperto_keys.unwrap_dek(self.crypto, row.dek_wrapped, await self.kek_async(scope))
        o = await open_sealed(self.crypto, parse_sealed(row.sealed), dek, keyring, allow_unverified=allow_unverified)
        return _entry(o, scope.name)

    def open_all(self, *, allow_unverified: bool = False, progress: Progress | None = None,
                 cache: VerifiedCache | None = None) -> Listing:
        """Open every object, one failure never stopping the rest (§2 "Conformance: Who This
        Specification Binds", §8.3 "The AI Boundary").

        Objects the ``cache`` vouches for are not verified again (trust is still derived
        from today's keyring); the rest are opened in batches of OPEN_BATCH."""
        return run_sync(self.open_all_async(allow_unverified=allow_unverified, progress=progress, cache=cache))

    async def open_all_async(self, *, allow_unverified: bool = False, progress: Progress | None = None,
                             cache: VerifiedCache | None = None) -> Listing:
        # three provider calls per batch (unwrap, decrypt, verify), each one JS call for the batch
        scopes_by_id = {s.scope_id: s for s in self.store.scopes().values()}
        keyring = self.keyring()
        rows = self.store.objects()
        entries: list[Entry] = []
        refused: list[tuple[bytes, str]] = []
        pending: list[StoredObject] = []
        for row in rows:
            scope = scopes_by_id.get(row.scope_id)
            hit = cache.get(row.object_id, row.sealed) if cache is not None and scope is not None else None
            if hit is not None and scope is not None:
                try:
                    o = reopen_verified(parse_sealed(row.sealed), hit[0], hit[1], keyring)
                    entries.append(_entry(o, scope.name))
                    continue
                except OwnmemError:
                    pass   # its key was revoked since: open it afresh under today's keyring
            pending.append(row)
        done = len(rows) - len(pending)
        for start in range(0, len(pending), OPEN_BATCH):
            chunk = pending[start:start + OPEN_BATCH]
            deks = await self._unwrap_deks_async(chunk, scopes_by_id)
            ready = [(r, d) for r, d in zip(chunk, deks, strict=False) if isinstance(d, bytes)]
            refused.extend((r.object_id, d) for r, d in zip(chunk, deks, strict=False) if isinstance(d, str))
            results = await open_many(self.crypto, [(r.sealed, d) for r, d in ready], keyring,
                                      allow_unverified=allow_unverified)
            for (row, _), res in zip(ready, results, strict=False):
                if isinstance(res, AuthenticationFailed):
                    refused.append((row.object_id, "could not authenticate"))
                elif isinstance(res, OwnmemError):
                    refused.append((row.object_id, str(res)))
                else:
                    entries.append(_entry(res, scopes_by_id[row.scope_id].name))
                    self._remember(cache, row, res, keyring)
            done += len(chunk)
            if progress is not None:
                progress(done, len(rows))
        entries, ignored = honour_links(entries)
        return Listing(entries, refused, ignored)

    async def _unwrap_deks_async(self, rows: list[StoredObject],
                                 scopes_by_id: dict[bytes, ScopeEntry]) -> list[bytes | str]:
        """Each row's DEK, or why it has none; one provider call per scope where it batches."""
        out: list[bytes | str] = ["object in an unknown scope"] * len(rows)
        by_scope: dict[bytes, list[int]] = {}
        for i, r in enumerate(rows):
            if r.scope_id in scopes_by_id:
                by_scope.setdefault(r.scope_id, []).append(i)
        for sid, idx in by_scope.items():
            try:
                kek = await self.kek_async(scopes_by_id[sid])
            except AuthenticationFailed:
                for i in idx:
                    out[i] = "its scope key does not unwrap"
                continue
            deks = await self.crypto.aes_kw_unwrap_many(kek, [rows[i].dek_wrapped for i in idx])
            for i, d in zip(idx, deks, strict=False):
                out[i] = d if isinstance(d, bytes) else "its key does not unwrap (erased or corrupt)"
        return out

    @staticmethod
    def _remember(cache: VerifiedCache | None, row: StoredObject, o: OpenedMemory, keyring: Keyring) -> None:
        kid = o.signer_key_id
        if cache is None or not o.signature_verified or kid is None:
            return
        pub = keyring.owner_pub if kid == keyring.owner_kid else keyring.accepted.get(kid)
        if pub is not None:
            cache.put(row.object_id, row.sealed, o.payload, pub)

    def resolve(self, ident: str, listing: Listing | None = None) -> Entry:
        """A memory by its hex id or a unique prefix of it."""
        return run_sync(self.resolve_async(ident, listing))

    async def resolve_async(self, ident: str, listing: Listing | None = None) -> Entry:
        ident = ident.strip().lower()
        listing = listing or await self.open_all_async(allow_unverified=True)
        matches = [e for e in listing.entries if e.id.hex().startswith(ident)] if ident else []
        if not matches:
            raise NotFound(f"no memory with id {ident!r}")
        if len(matches) > 1:
            raise NotFound(f"id prefix {ident!r} is ambiguous ({len(matches)} memories)")
        return matches[0]

    def edit(self, ident: str, *, content: str | None = None, tags: Iterable[str] | None = None,
             mem_type: int | None = None, confidence: float | None = None, now: int | None = None,
             merges: Iterable[bytes] = ()) -> bytes:
        """Seal a new version that supersedes ``ident`` (and, settling a conflict, ``merges``:
        the other heads); the old ones stay until forgotten."""
        return run_sync(self.edit_async(ident, content=content, tags=tags, mem_type=mem_type, confidence=confidence,
                                        now=now, merges=merges))

    async def edit_async(self, ident: str, *, content: str | None = None, tags: Iterable[str] | None = None,
                         mem_type: int | None = None, confidence: float | None = None, now: int | None = None,
                         merges: Iterable[bytes] = ()) -> bytes:
        e = await self.resolve_async(ident)
        o = e.opened
        if o.trust is Trust.UNVERIFIED:
            raise VaultError("an unverified memory cannot be edited; forget it or migrate it")
        if o.trust is not Trust.SELF:
            # Re-sealing another author's text under the owner key would make it read as the
            # owner's own (ApertoMemory §8 "Conversion Paths Between Trust Levels": no conversion
            # may raise trust it cannot prove).
            raise VaultError("this memory was written by another key; editing would re-sign it as yours. "
                             "Add your own version instead")
        old = o.memory
        exts = dict(old.extensions or {})
        exts[SUPERSEDES] = o.object_id
        exts.pop(MERGES, None)
        if merges:
            exts[MERGES] = sorted(set(merges) - {o.object_id})
        at = int(time.time()) if now is None else now
        memory = replace(old, content=old.content if content is None else content,
                         tags=old.tags if tags is None else tuple(tags),
                         mem_type=old.mem_type if mem_type is None else mem_type,
                         confidence=(o.confidence if o.confidence is not None else 0.8)
                         if confidence is None else confidence,
                         updated=at, tool=TOOL, extensions=exts, custody=old.custody)
        return (await self._seal_into_async(memory, self.scope(e.scope))).object_id

    def resolve_conflict(self, keep: str) -> bytes:
        """Settle a conflict: a new version with the content of ``keep`` supersedes every head
        of its chain, so one head remains; no version is lost (history stays until forgotten)."""
        return run_sync(self.resolve_conflict_async(keep))

    async def resolve_conflict_async(self, keep: str) -> bytes:
        listing = await self.open_all_async(allow_unverified=True)
        chosen = await self.resolve_async(keep, listing)
        for group in listing.conflicts():
            if any(h.id == chosen.id for h in group):
                return await self.edit_async(chosen.id.hex(), merges=[h.id for h in group if h.id != chosen.id])
        raise VaultError("that version is not part of a conflict")

    def forget(self, ident: str) -> list[bytes]:
        """Cryptographic erasure of every version of a memory: the sealed objects and the
        wrapped DEKs are destroyed; the ids are remembered so an import cannot revive them."""
        return run_sync(self.forget_async(ident))

    async def forget_async(self, ident: str) -> list[bytes]:
        listing = await self.open_all_async(allow_unverified=True)
        start = await self.resolve_async(ident, listing)
        by_id = {e.id: e for e in listing.entries}
        chain: set[bytes] = set()
        stack = [start.id]
        while stack:
            cur = stack.pop()
            if cur in chain:
                continue
            chain.add(cur)
            e = by_id.get(cur)
            if e is None:
                continue
            stack.extend(e.superseded_by)
            if e.supersedes is not None:
                stack.append(e.supersedes)
            stack.extend(e.merges)
        gone = sorted(chain & self.store.object_ids())
        # Objects that reached the server leave a signed FORGET receipt in the outbox, so
        # the next sync erases them there and, through the feed, on every other device.
        now = int(time.time())
        receipts = [(cid, await self.forget_receipt_async(cid, now)) for cid in self.store.cell_ids_of(gone).values()]
        with self.store.transaction():
            self.store.erase(gone, now)
            for cid, r in receipts:
                self.store.queue_erasure(cid, r)
        self.store.checkpoint()
        return gone

    def forget_receipt(self, cell_id: bytes, now: int) -> bytes:
        """The holder-signed SAIHM FORGET receipt that lets the server, and through it every
        other device, erase the cell ``cell_id``."""
        return run_sync(self.forget_receipt_async(cell_id, now))

    async def forget_receipt_async(self, cell_id: bytes, now: int) -> bytes:
        h = self.holder()   # derived once (ML-DSA-65 key generation), on the synchronous path
        return (await make_receipt(self.crypto, xi=h.xi, holder_id=h.holder_id, operation="FORGET",
                                   subject_id=cell_id, timestamp=now)).to_cbor()

    def search(self, query: str, listing: Listing | None = None, *, visible: Callable[[Entry], bool] | None = None,
               limit: int | None = None, cursor: str | None = None) -> tuple[list[Entry], str | None]:
        """Client-side search (§15.4 "Embeddings": never on a server) -> one page of the heads
        that answer ``query``, best first (ownmem.recall.ranking, the ranking every search of
        ownmem uses), among those ``visible`` admits, and the cursor of the next page."""
        listing = listing or self.open_all()
        heads = {e.id: e for e in listing.heads()}
        ranking = ranking_of(heads.values())
        keys, nxt = ranking.page(query, None if visible is None else (lambda k: visible(heads[k])), limit, cursor)
        return [heads[k] for k in keys], nxt


def search_doc(e: Entry) -> Doc:
    """What the ranking reads of a memory: its text, tags, time and confidence."""
    o = e.opened
    return Doc(e.id, o.content, tuple(o.tags), search_label(o.extensions), o.created or 0,
               1.0 if o.confidence is None else o.confidence)


def ranking_of(entries: Iterable[Entry]) -> Ranking:
    r = Ranking()
    r.put(search_doc(e) for e in entries)
    return r
