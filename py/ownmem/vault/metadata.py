"""The vault metadata the sync server stores (owner-signed, versioned, public): the document,
the merge of this device's view with the server's, and this device's record of the newest
version it has seen (a replayed older version must never lift a revocation)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ownmem.aperto.container import ScopeEntry, VaultPublic, parse_vault_public
from ownmem.aperto.keys import WrappedKek
from ownmem.crypto import cbor, run_sync, sha256
from ownmem.errors import MalformedInput, SyncError, VaultError
from ownmem.vault.rekey import Succession, chain_to, parse_succession, succession_valid
from ownmem.vault.store import Store
from ownmem.vault.vault import UnlockedVault


@dataclass(frozen=True, slots=True)
class Metadata:
    """The owner-signed, versioned vault metadata the server stores (public, not secret)."""

    vault_public: VaultPublic
    revoked: frozenset[bytes]
    sync_pub: bytes
    holder_pub: bytes
    amem_sig: bytes
    # the owner-key succession records (vault/rekey.py), oldest first; absent until the first
    # passphrase change, so the documents of a vault that never changed it stay as they were
    successions: tuple[Succession, ...] = ()
    # the recovery kit's public record (vault/recovery.py ``record``): every device holds the kit,
    # so a passphrase change on any of them re-wraps it, and the server answers it to a new
    # device; absent while the vault has no kit
    recovery: bytes | None = None
    # scope-KEK rotation (vault/rotate.py): scope_id -> (KEK generation, the retiring KEK's wrap
    # while the server may still hold wraps under it); only scopes past generation 1
    generations: dict[bytes, tuple[int, WrappedKek | None]] = field(default_factory=dict)

    def encode(self) -> bytes:
        m = {"vault_public": self.vault_public.to_cbor(), "revoked": sorted(self.revoked),
             "sync_pub": self.sync_pub, "holder_pub": self.holder_pub, "amem_sig": self.amem_sig}
        if self.successions:
            m["successions"] = [s.encode() for s in self.successions]
        if self.recovery is not None:
            m["recovery"] = self.recovery
        if self.generations:
            m["kek_gens"] = [[sid, g, *((r.kek_wrapped, r.eph_pub) if r else ())]
                             for sid, (g, r) in sorted(self.generations.items())]
        return cbor.encode(m)


def _generations(raw: object) -> dict[bytes, tuple[int, WrappedKek | None]]:
    if not isinstance(raw, list):
        raise MalformedInput("bad KEK generation list")
    out: dict[bytes, tuple[int, WrappedKek | None]] = {}
    for r in raw:
        if not (isinstance(r, list) and len(r) in (2, 4) and isinstance(r[0], bytes) and len(r[0]) == 16
                and type(r[1]) is int and 1 <= r[1] < 1 << 32 and all(isinstance(x, bytes) for x in r[2:])):
            raise MalformedInput("malformed KEK generation")
        out[r[0]] = (r[1], WrappedKek(r[2], r[3]) if len(r) == 4 else None)
    return out


def parse_metadata(data: bytes) -> Metadata:
    try:
        m = cbor.decode(data)
        revoked = m["revoked"]
        if not isinstance(revoked, list) or not all(isinstance(k, bytes) and len(k) == 8 for k in revoked):
            raise MalformedInput("bad revoked list")
        succ = m.get("successions", [])
        if not isinstance(succ, list):
            raise MalformedInput("bad succession list")
        recovery = m.get("recovery")
        if recovery is not None and not isinstance(recovery, bytes):
            raise MalformedInput("bad recovery kit record")
        return Metadata(parse_vault_public(m["vault_public"]), frozenset(revoked), m["sync_pub"], m["holder_pub"],
                        m["amem_sig"], tuple(parse_succession(s) for s in succ), recovery,
                        _generations(m.get("kek_gens", [])))
    except (KeyError, TypeError):
        raise MalformedInput("malformed vault metadata") from None


def merge_metadata(local: VaultPublic, local_revoked: set[bytes], remote: Metadata,
                   base_revoked: frozenset[bytes] | set[bytes] = frozenset(),
                   ) -> tuple[dict[str, ScopeEntry], dict[bytes, bytes], set[bytes], list[str]]:
    """Pure merge: scopes are added by name and never overwritten; keys are the union of both
    keyrings less every revocation either side made (revocation wins: it is the safe side).
    The revocation list is merged three-way against ``base_revoked``, the list this device
    last agreed with the server: a revocation that either side lifted since then (the key
    was explicitly trusted again) stays lifted; every new revocation is kept.
    One name given to two different scopes (created on two devices while apart) is settled
    the same way on every device, so sync converges and every memory stays readable: the
    lower scope id keeps the name, the other becomes ``name~<first 8 hex digits of its id>``.
    -> (scopes, known keys, revoked, conflicts)."""
    scopes = dict(local.scopes)
    conflicts = []
    have = {s.scope_id for s in scopes.values()}
    for name, s in remote.vault_public.scopes.items():
        if s.scope_id in have:          # known here, perhaps already under its settled name
            continue
        if name not in scopes:
            scopes[name] = s
        elif scopes[name].scope_id != s.scope_id:
            conflicts.append(name)
            keep, other = sorted((scopes[name], s), key=lambda x: x.scope_id)
            renamed = f"{name}~{other.scope_id.hex()[:8]}"
            scopes[name] = keep
            scopes[renamed] = replace(other, name=renamed)
    revoked = {k for k in set(local_revoked) | set(remote.revoked)
               if k not in base_revoked or (k in local_revoked and k in remote.revoked)}
    keys = {k: v for k, v in {**remote.vault_public.known_keys, **local.known_keys}.items() if k not in revoked}
    return scopes, keys, revoked, conflicts


def check_metadata_seen(store: Store, version: int, doc: bytes) -> None:
    """Refuse vault metadata older than this device has seen, or a second document under a
    version it has seen: the owner signs (name, version, document), so a replayed older
    version verifies, and reading it as current would lift every revocation made since."""
    raw = store.sync_get("metadata_seen")
    if raw is None:
        return
    seen = cbor.decode(raw)
    if not (isinstance(seen, list) and len(seen) == 2 and type(seen[0]) is int and isinstance(seen[1], bytes)):
        raise VaultError("this device's record of the vault metadata it saw is damaged")
    if version < seen[0]:
        raise SyncError(f"the server offers older vault metadata (version {version}) than this device has "
                        f"seen (version {seen[0]}): refused, nothing changed (a rollback, or another server)")
    if version == seen[0] and sha256(doc) != seen[1]:
        raise SyncError(f"the server shows another document for vault metadata version {version} than this "
                        "device saw: refused, nothing changed (a forked history)")


def note_metadata_seen(store: Store, version: int, doc: bytes) -> None:
    """Within a transaction: ``version`` (and its document's digest) is the newest seen."""
    store.sync_set("metadata_seen", cbor.encode([version, sha256(doc)]))


def take_successions(v: UnlockedVault, theirs: tuple[Succession, ...]) -> None:
    """The server's owner-key succession records, if they extend this device's and chain to the
    owner key (each verified): what the superseded keys signed then opens as self here too."""
    mine = v.successions()
    if len(theirs) <= len(mine) or list(theirs[:len(mine)]) != mine:
        return
    if not all(run_sync(succession_valid(v.crypto, r)) for r in theirs):
        raise SyncError("the server's record of this vault's earlier owner keys does not verify: refused")
    if chain_to(list(theirs), v.identity.sign_pub) is None:
        return                       # records of another chain: they make nothing open as self here
    with v.store.transaction():
        v.store.set_successions(cbor.encode([r.encode() for r in theirs]))
