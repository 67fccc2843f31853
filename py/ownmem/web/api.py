"""The vault operations the web worker calls (docs/web.md "Worker operations").

``handle(op, args)`` is the one entry point.  With JSPI the worker calls it with
``callPromising`` so that the synchronous vault code below can wait for WebCrypto
and IndexedDB through ``ownmem.crypto.run_sync``.  Without JSPI (the worker registered
``ownmem_js.ASYNC``) it returns a coroutine instead, which the worker awaits (Pyodide
hands it to JavaScript as a thenable): the operations below that are ``async def`` then
await the provider's WebCrypto promises for real (docs/web.md "Without JSPI").  Results are plain dicts
of JSON-able values and bytes; errors are ``{"code", "message"}`` of an OwnmemError,
never a secret.  The same UnlockedVault, import and sync code as the CLI runs here;
only the store (IndexedDB), the crypto provider (WebCrypto) and HTTP (fetch) differ.
"""
from __future__ import annotations

import functools
import inspect
import json
import time
from typing import Any

from ownmem.aperto.model import MemType
from ownmem.crypto import provider, run_sync, set_provider
from ownmem.errors import ImportRefused, MalformedInput, NotFound, OwnmemError, SyncError, VaultError, WrongPassphrase
from ownmem.usecases.authors import AgentKeys, written_by
from ownmem.usecases.listing import shown
from ownmem.vault import recovery
from ownmem.vault.devicekey import set_label
from ownmem.vault.remote import Remote
from ownmem.vault.slots import Slot
from ownmem.vault.sync import Syncer, SyncReport, adopt_from_server_async, link
from ownmem.vault.unlock import check_passphrase_async, create_in_async, unlock_store_async, unlock_with_slot_async
from ownmem.vault.vault import DEFAULT_SCOPE, Entry, Listing, UnlockedVault, search_doc
from ownmem.web import history
from ownmem.web.cache import CACHE_INFO, DeviceCache, load_cache, save_cache
from ownmem.web.remote import FetchRemote
from ownmem.web.search import Facets, Filters, ListedSearch
from ownmem.web.store import IdbStore
from ownmem.wire import codec

__all__ = ["CACHE_INFO", "App", "DeviceCache", "handle"]   # the cache's names: ownmem.web.cache

# Start-up imports are what the first screens need (create, unlock, login, list, add, edit,
# forget, sync): the worker imports this module before its first answer, so every import here
# is paid by every start (docs/web.md "Start-up").  The other operations import their modules
# when first called (below: import, export, receipts, log, shares, agents, audit, staged
# writes, records): they cost nothing until used.

PREVIEW_ROWS = 500           # records a preview lists besides every one with a problem
MAX_RECORD_FIELDS = 200      # input fields a preview offers a mapping for
RECORDS_CHUNK = 25           # records sealed between two progress events
IMPORT_FROM_SHOWN = 5        # memories an import-from preview shows
IMPORT_FROM_SKIPS = 200      # skipped memories it names


class App:
    def __init__(self, js: Any) -> None:
        self.js = js
        # the worker has no JSPI and gave glue.js to await (web/js/worker.js): run the
        # ``async def`` operations on its event loop rather than with run_sync
        self.awaits = getattr(js, "ASYNC", None) is not None
        self.store = IdbStore(js)
        self.loaded = self.store.load()
        self.vault: UnlockedVault | None = None
        self.cache = DeviceCache()
        self.syncer: Any = None
        self.last_sync: int | None = None
        self._agents: AgentKeys | None = None      # agent id -> its derived author key id, per unlock
        self._anchors_checked: set[str] = set()   # audit anchors proven in the log (op_audit)
        self.listed_search = ListedSearch()        # the list screen's search (op_search)

    # ------------------------------------------------------------ helpers
    @property
    def v(self) -> UnlockedVault:
        if self.vault is None:
            raise VaultError("the vault is locked")
        return self.vault

    async def _load_cache(self) -> None:
        self.cache = DeviceCache()
        self.cache = await load_cache(self.js, self.v)

    def _erase_from_cache(self) -> None:
        """Erasure reaches the plaintext cache at once (DESIGN.md "Browser specifics"; issue 9
        item 4): the verified plaintext of every object the store no longer holds leaves the
        IndexedDB record now, not at some later listing.  The record is sealed again without
        them, under a fresh nonce, replacing the old one in the same put."""
        live = self.store.object_ids()
        self.listed_search.keep_only(live)      # and the search index's copy of their text
        if self.vault is not None and self.cache.keep_only(live):
            self._save_cache()

    def _save_cache(self) -> None:
        run_sync(self._save_cache_async())

    async def _save_cache_async(self) -> None:
        await save_cache(self.js, self.v, self.cache, self.store.object_ids())

    # ------------------------------------------------------------ entries
    @property
    def agents(self) -> AgentKeys:
        if self._agents is None:
            self._agents = AgentKeys(self.v)
        return self._agents

    def _entry_json(self, e: Entry) -> dict[str, Any]:
        """The list item (Entry.to_json) and, for an agent-written memory, which agent wrote it
        (usecases.authors.written_by): ``agent_id`` the agent the memory names, and
        ``agent_confirmed`` whether its signer is the key this vault derives for that agent."""
        j = e.to_json()
        a = written_by(e, self.agents)
        j["agent_id"] = a.agent_id if a is not None else None
        j["agent_confirmed"] = a is not None and a.confirmed
        return j

    def _linked(self) -> tuple[str, str] | None:
        return Syncer.linked(self.store)

    # ------------------------------------------------------------ operations
    async def op_boot(self) -> dict[str, Any]:
        ident = self.store.identity()
        linked = self._linked()
        p = provider()
        features = getattr(p, "features", None)   # the browser provider's feature detection
        return {"vault": None if ident is None else {
                    "count": self.store.count(), "server": linked[0] if linked else None,
                    "name": linked[1] if linked else None, "salt": ident.salt.hex()},
                "provider": await features() if features is not None else {}}

    async def op_create(self, passphrase: str, master: Any = None, salt: Any = None) -> dict[str, Any]:
        if self.store.identity() is not None:
            raise VaultError("this browser already holds a vault")
        if not passphrase or len(passphrase) < 1:
            raise VaultError("the passphrase must not be empty")
        self.vault = await create_in_async(self.store, passphrase, provider(), salt=bytes(salt) if salt else None,
                                           master=bytes(master) if master else None)
        return {"key_id": self.v.identity.key_id.hex()}

    async def op_unlock(self, passphrase: str, master: Any = None) -> dict[str, Any]:
        self.vault = await unlock_store_async(self.store, passphrase, provider(),
                                              master=bytes(master) if master else None)
        await self._load_cache()
        self._erase_from_cache()   # a record written before erasures reached the cache at once
        return {"count": self.store.count()}

    def op_lock(self) -> dict[str, Any]:
        if self.vault is not None:
            self.vault.lock()       # every key, and the provider's cached ones; the store stays for the next unlock
        self.vault = None
        self.cache = DeviceCache()
        self.syncer = None
        self._agents = None
        self.listed_search = ListedSearch()
        return {}

    # ------------------------------------------------------------ unlock slots (vault/slots.py)
    def op_slots(self) -> dict[str, Any]:
        """The unlock slots, also while locked (the unlock screen offers its passkeys): public."""
        return {"slots": [slot_json(x) for x in self.store.unlock_slots()]}

    async def op_slot_add(self, kind: str, label: str, ref: Any, secret: Any) -> dict[str, Any]:
        slot = await self.v.add_unlock_slot_async(kind, label, _raw(ref), _raw(secret))
        return slot_json(slot)

    async def op_passphrase_check(self, passphrase: str) -> dict[str, Any]:
        """{} if ``passphrase`` is this unlocked vault's, else WrongPassphrase: asked before a
        passkey is added (web/js/views/passkeys.js), so an unattended unlocked device cannot."""
        if self.vault is None:     # a locked vault is opened by op_unlock, which checks the same
            raise VaultError("the vault is locked")
        await check_passphrase_async(self.store, passphrase, provider())
        return {}

    def op_slot_remove(self, slot_id: str) -> dict[str, Any]:
        self.v.remove_unlock_slot(_raw(slot_id))
        return {}

    async def op_unlock_slot(self, slot_id: str, secret: Any) -> dict[str, Any]:
        """What ``op_unlock`` does, the slot's secret in place of the passphrase."""
        self.vault = await unlock_with_slot_async(self.store, provider(), _raw(slot_id), _raw(secret))
        await self._load_cache()
        self._erase_from_cache()
        return {"count": self.store.count()}

    # ------------------------------------------------------------ the recovery kit (vault/recovery.py)
    def op_recovery_create(self) -> dict[str, Any]:
        """A new kit in place of the last (published when linked) -> its words, shown once."""
        words, _ = run_sync(recovery.create_kit_async(self.v))
        if self._linked() is not None:
            self._syncer().sync_metadata(SyncReport())
        return {"words": words}

    async def op_recovery_use(self, words: str, passphrase: str) -> dict[str, Any]:
        """Unlock with the kit's words, set the new ``passphrase`` at once (on the server too when
        linked) and make a new kit in place of the used one -> ``{"count", "words"}``.  If the
        change fails, the vault is locked again: the words alone never leave it open."""
        if not passphrase:
            raise VaultError("choose a new passphrase")
        self.vault = await recovery.unlock_with_words_async(self.store, provider(), words)
        new_words = await self._use_kit(passphrase, self._syncer() if self._linked() is not None else None)
        await self._load_cache()
        self._erase_from_cache()
        return {"count": self.store.count(), "words": new_words}

    async def op_recovery_login(self, server: str, name: str, words: str, passphrase: str,
                                label: str = "") -> dict[str, Any]:
        """A browser holding no vault, with the vault's name and the kit's words only (a lost phone
        and a forgotten passphrase): the vault is fetched as ``ownmem recovery use --server`` fetches
        it (vault/recovery_sync.py: the words are checked before any request, the server's kit
        proven by its root check before anything is stored), the new ``passphrase`` set at once,
        here and on the server, a new kit made in place of the used one, then one sync ->
        ``{"words", "synced", "problem", "pending", "refusals"}`` (a failed sync after the change loses
        neither it nor the new words: the live sync tries again).  ``label``: as ``op_login``'s.  If the change
        fails after the fetch, the vault stays in this browser, locked, and the kit still opens it
        (the unlock screen's "Forgot your passphrase?")."""
        from ownmem.vault.recovery_sync import recover_new_device_async  # start-up time: loaded at the first use
        if self.store.identity() is not None:
            raise VaultError("this browser already holds a vault")
        if not passphrase:
            raise VaultError("choose a new passphrase")
        syncer = await recover_new_device_async(self.store, self._remote(server, name), words, provider(),
                                                label=label or None)
        self.syncer, self.vault = syncer, syncer.v
        new_words = await self._use_kit(passphrase, syncer)
        try:
            done = self.op_sync()
        except SyncError as e:     # the change and the new words stand; the live sync tries again
            return {"words": new_words, "synced": False, "problem": str(e), "pending": self.store.unpushed_count(),
                    "refusals": []}
        return {"words": new_words, "synced": True, "problem": None, "pending": done["pending"],
                "refusals": done["refusals"]}

    async def _use_kit(self, passphrase: str, syncer: Syncer | None) -> list[str]:
        """The forced new passphrase and a new kit (recovery_sync.use_kit); the vault locked again
        if they fail: the words alone never leave it open."""
        from ownmem.vault.recovery_sync import use_kit_async  # start-up time: loaded at the first use
        try:
            return await use_kit_async(self.v, passphrase, syncer)
        except BaseException:
            self.op_lock()
            raise

    def _open_all(self, include_unverified: bool = False) -> Listing:
        return run_sync(self._open_all_async(include_unverified))

    async def _open_all_async(self, include_unverified: bool = False) -> Listing:
        listing = await self.v.open_all_async(allow_unverified=include_unverified, cache=self.cache)
        await self._save_cache_async()
        return listing

    async def op_list(self, include_unverified: bool = False) -> dict[str, Any]:
        # control records (UOMP session records, revocations, confirmations) are no memory:
        # not listed, searched or counted (the search and filters run on this list)
        listing = shown(await self._open_all_async(include_unverified))
        heads = sorted(listing.heads(), key=lambda e: (-(e.opened.created or 0), e.id))
        shown_json = [self._entry_json(e) for e in heads]
        # what the list shows is what its search ranks (op_search): only the changes reach the ranking
        self.listed_search.listed((search_doc(e), _facets(j)) for e, j in zip(heads, shown_json, strict=True))
        return {"entries": shown_json, "refused": len(listing.refused),
                "conflicts": [[e.id.hex() for e in g] for g in listing.conflicts()],
                "scopes": sorted(self.v.scopes())}

    async def op_add(self, content: str, tags: list[str] | None = None, type: str = "semantic",
                     confidence: float = 0.8, scope: str = DEFAULT_SCOPE) -> dict[str, Any]:
        oid = await self.v.add_async(content, tags=tags or [], mem_type=MemType.parse(type),
                                     confidence=float(confidence), scope=scope)
        # The new memory, opened from what was stored (and so verified), for the page to show
        # at once instead of listing the whole vault again; the device cache learns it too.
        row = self.store.get_object(oid)
        if row is None:
            raise VaultError("the new memory was not stored")
        keyring = self.v.keyring()
        entry = await self.v.open_stored_async(row, {s.scope_id: s for s in self.v.scopes().values()}, keyring)
        UnlockedVault._remember(self.cache, row, entry.opened, keyring)  # noqa: SLF001
        j = self._entry_json(entry)
        self.listed_search.added(search_doc(entry), _facets(j))
        return {"id": oid.hex(), "entry": j}

    def op_search(self, query: str, tag: str = "", type: str = "", scope: str = "", trust: str = "",
                  include_unverified: bool = False) -> dict[str, Any]:
        """The list screen's search (ownmem.web.search): the ids of the listed memories the filters
        admit that answer ``query``, best first, by ownmem's one ranking; the ranking is built at
        the first query and then kept in step with the listing."""
        filters = Filters(str(tag), str(type), str(scope), str(trust), bool(include_unverified))
        return {"ids": [k.hex() for k in self.listed_search.search(str(query), filters)]}

    async def op_edit(self, id: str, content: str | None = None, tags: list[str] | None = None,
                      type: str | None = None, confidence: float | None = None) -> dict[str, Any]:
        new = await self.v.edit_async(id, content=content, tags=tags, mem_type=MemType.parse(type) if type else None,
                                      confidence=float(confidence) if confidence is not None else None)
        return {"id": new.hex()}

    async def op_resolve(self, id: str) -> dict[str, Any]:
        return {"id": (await self.v.resolve_conflict_async(id)).hex()}

    async def op_forget(self, id: str) -> dict[str, Any]:
        gone = await self.v.forget_async(id)
        self._erase_from_cache()
        return {"erased": len(gone)}

    def op_import(self, data: Any, accept_container_keys: bool = False, passphrase: str = "") -> dict[str, Any]:
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.aperto.container import parse_container
        from ownmem.vault.transfer import import_bytes
        raw = bytes(data)
        ident = self.vault.identity if self.vault is not None else None
        if ident is not None and parse_container(raw).meta.sign_pub != ident.sign_pub:
            # The page imports into an unlocked vault without a passphrase: refuse a file of
            # another identity as import_bytes does, not with Argon2id failing on "".
            raise ImportRefused("this file belongs to a different identity; ownmem imports your own memory only")
        report, unlocked = import_bytes(lambda: self.store, raw, passphrase,
                                        accept_container_keys=accept_container_keys, crypto=provider(), ident=ident)
        if self.vault is None:
            self.vault = unlocked
        return {"imported": report.imported, "imported_ids": report.imported_ids, "skipped": report.skipped,
                "refused": report.refused,
                "scopes_added": report.scopes_added, "scopes_refused": report.scopes_refused,
                "keys_added": report.keys_added, "keys_held_back": report.keys_held_back,
                "identity_adopted": report.identity_adopted, "metadata_signed": report.metadata_signed}

    def op_export(self) -> dict[str, Any]:
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.vault.transfer import export_bytes
        data, n = export_bytes(self.v)
        # counted as the list counts (issue 23): its memories, the earlier versions in their
        # history, and the rest (agent sessions and other control records, unverified objects)
        listing = shown(self._open_all())
        memories = len(listing.heads())
        return {"data": data, "count": n, "memories": memories, "versions": len(listing.entries) - memories,
                "other": max(0, n - len(listing.entries))}

    # ------------------------------------------------------------ sync
    def _syncer(self) -> Any:
        if self.syncer is None:
            linked = self._linked()
            if linked is None:
                raise VaultError("this vault is not linked to a server yet")
            self.syncer = Syncer(self.v, self._remote(linked[0], linked[1]))
        return self.syncer

    def _remote(self, server: str, name: str) -> Remote:
        """A new device's way to the server: fetch (tests/web put the CLI's HTTP client here)."""
        return FetchRemote(server, name)

    def op_link(self, server: str, name: str, label: str = "") -> dict[str, Any]:
        """-> ``{"name"}``: the name linked, which is not ``name`` when this vault's keys hold
        a vault of another name on that server already (a backup restored under a new name):
        it is linked back to that one, never registered twice (docs/decisions.md, issue 23).
        ``label``: this browser's name in the vault's device list ("Firefox on Linux")."""
        if label:
            set_label(self.store, label)
        remote = FetchRemote(server, name)
        link(self.v, server, name, remote=remote, follow=True)
        self.syncer = Syncer(self.v, remote)
        return {"name": remote.name}

    async def op_login(self, server: str, name: str, passphrase: str, master: Any = None,
                       label: str = "") -> dict[str, Any]:
        if self.store.identity() is not None:
            raise VaultError("this browser already holds a vault")
        self.syncer = await adopt_from_server_async(self.store, self._remote(server, name), passphrase, provider(),
                                                    master=bytes(master) if master else None, label=label or None)
        self.vault = self.syncer.v
        return self.op_sync()

    def op_sync(self) -> dict[str, Any]:
        try:
            r = self._syncer().sync_once()
        finally:
            # a sync that failed part way may still have applied erasures from the feed
            self._erase_from_cache()
        self.last_sync = int(time.time())
        return {"pushed": r.pushed, "pulled": r.pulled, "erased_remote": r.erased_remote,
                "erased_here": r.erased_here, "pending": self.store.unpushed_count(), "refusals": list(r.refusals)}

    def op_token(self) -> dict[str, Any]:
        s = self._syncer()
        s.ensure_login()
        return {"token": s.remote.token, "url": s.remote._url("/events")}  # noqa: SLF001

    def op_status(self) -> dict[str, Any]:
        linked = self._linked()
        return {"pending": self.store.unpushed_count() + len(self.store.erase_outbox()),
                "last_sync": self.last_sync, "server": linked[0] if linked else None,
                "name": linked[1] if linked else None, "unlocked": self.vault is not None,
                "count": self.store.count()}

    # ------------------------------------------------------------ the passphrase (issue 24)
    async def op_passphrase_change(self, current: str, new: str, master: Any = None, salt: Any = None,
                                   current_master: Any = None) -> dict[str, Any]:
        """Change the passphrase as `ownmem passphrase change` does (vault/rekey.py): linked, here
        and on the server, both or neither (vault/rekey_sync.py); else here only.  The current
        passphrase is typed again and checked first: whoever finds the app unlocked must not be
        able to change it.  ``current_master``, ``salt`` and ``master``: Argon2id of the current
        passphrase (this vault's salt) and of the new one (a fresh salt), when the page derived
        them (client.js); else they are derived here.  The device cache stays valid: its key
        comes from the vault root, which a change keeps."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.aperto import keys as aperto_keys
        from ownmem.vault import rekey, rekey_sync
        v, p = self.v, provider()
        if not new:
            raise VaultError("choose a new passphrase")
        if new == current:
            raise VaultError("the new passphrase is the same as the current one: nothing changed")
        pub = v.store.identity()
        if pub is None:
            raise VaultError("there is no vault here yet")
        cm = bytes(current_master) if current_master else await aperto_keys.master_from_passphrase(p, current, pub.salt)
        if (await aperto_keys.identity_from_master(p, cm)).sign_pub != v.identity.sign_pub:
            raise WrongPassphrase("wrong current passphrase: nothing changed")
        given = bytes(salt) if salt else None
        derived = bytes(master) if master and given else None
        linked = self._linked()
        if linked is not None:
            done = rekey_sync.change_passphrase(self._syncer(), new, salt=given, master=derived)
        else:
            done = await v.change_passphrase_async(new, salt=given, master=derived)
        return {"server": linked[0] if linked else None, "key_id": done.ident.key_id.hex(),
                "scopes": sum(1 for name in done.scopes if not rekey.is_retired(name))}

    async def op_passphrase_update(self, new: str) -> dict[str, Any]:
        """This device missed a change made on another one (its sync stopped with
        ``passphrase_changed``): take the new passphrase as `ownmem passphrase update` does
        (vault/rekey_sync.py catch_up: it must derive the server's keys and open this vault's own
        root, nothing changed otherwise), then sync.  Argon2id runs here, awaited (the browser's
        hash-wasm), as the server's salt is known only here."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.aperto import keys as aperto_keys
        from ownmem.vault.rekey_sync import catch_up
        if not new:
            raise VaultError("enter the new passphrase")
        s = self._syncer()
        info = s.remote.lookup()
        if info is None:
            raise SyncError(f"no vault named {s.remote.name!r} on {s.remote.base}")
        master = await aperto_keys.master_from_passphrase(provider(), new, info.salt)
        catch_up(s, new, derived=(info.salt, master))
        synced, problem, pending = self._sync_now()
        return {"synced": synced, "problem": problem, "pending": pending}

    # ------------------------------------------------------------ the public log
    def op_receipts(self, id: str) -> dict[str, Any]:
        """The receipts the public log holds for every version of memory ``id``, each checked
        here against this vault's holder key (ownmem.web.receipts)."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.web.receipts import PER_CELL, ReceiptView, check_entry, parse_log_page
        oid = bytes.fromhex(id)
        if len(oid) != 16:
            raise MalformedInput("a memory id is 32 hex digits")
        versions = history.versions(self.v, oid)
        cells = self.store.cell_ids_of(versions)
        found: list[ReceiptView] = []
        truncated = False
        if cells and self._linked() is not None:
            remote = self._syncer().remote
            holder = self.v.holder().public
            for v in versions:
                cid = cells.get(v)
                if cid is None:
                    continue
                url = f"{remote.base}/v1/log?subject={cid.hex()}&limit={PER_CELL}"
                rows = parse_log_page(codec.load_json(remote._req("GET", url)))  # noqa: SLF001
                truncated = truncated or len(rows) > PER_CELL
                found.extend(run_sync(check_entry(self.v.crypto, row, cid, v, holder)) for row in rows[:PER_CELL])
        found.sort(key=lambda r: (r.timestamp or 0, r.receipt_id))
        return {"receipts": [r.to_json() for r in found], "versions": len(versions), "cells": len(cells),
                "truncated": truncated, "holder_id": self.v.holder().holder_id.hex()}

    def op_log(self) -> dict[str, Any]:
        """The public log as this device last verified it (vault.logwatch.log_status)."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.vault.logwatch import log_status
        st = log_status(self.store)
        return {"status": None if st is None else {
            "origin": st.origin, "size": st.size, "root_hash": st.root_hash, "checked_at": st.checked_at,
            "problem": st.problem, "compared_devices": st.compared_devices}}

    # ------------------------------------------------------------ sharing between people
    def op_shares(self) -> dict[str, Any]:
        """The contracts offered by this vault and to it, each verified (vault.sharing.offers)."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.vault import sharing
        from ownmem.web.shares import share_json
        got = sharing.offers(self._syncer())
        return {"offered": [share_json(x, got.sharers, self.store) for x in got.offered],
                "received": [share_json(x, got.sharers, self.store) for x in got.received],
                "refused": list(got.refused), "more": got.more, "holder_id": self.v.holder().holder_id.hex()}

    def op_shared(self) -> dict[str, Any]:
        """The memories of every active contract offered to this vault and accepted, fetched
        and checked now (vault.sharing.received); nothing of them is stored here."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.vault import sharing
        from ownmem.web.shares import shared_json
        got = sharing.received(self._syncer())
        return {"memories": [shared_json(m) for m in got.memories],
                "refused": [[cell.hex(), why] for cell, why in got.refused]}

    def op_share_offer(self, memories: list[str], to: str, mode: str,
                       expires_in: int | None = None) -> dict[str, Any]:
        """Offer this vault's own memories to another holder (vault.sharing.share, as `ownmem
        share create`): nothing is released until the grantee accepts."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.web.shares import make_offer, offer_json, offer_request
        req = offer_request(memories, to, mode, expires_in)
        return offer_json(make_offer(self._syncer(), req, int(time.time())))

    def op_share_answer(self, id: str, action: str) -> dict[str, Any]:
        """The grantee's answer to a contract: accept (once it verifies), decline, withdraw."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.vault import sharing
        acts = {"accept": sharing.accept, "decline": sharing.decline, "withdraw": sharing.withdraw}
        if action not in acts:
            raise MalformedInput("a share is answered with accept, decline or withdraw")
        return {"state": acts[action](self._syncer(), _contract_id(id))}

    def op_share_revoke(self, id: str) -> dict[str, Any]:
        """The sharer revokes a contract (keys deleted on the server, then a REVOKE receipt)."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.vault import sharing
        r = sharing.revoke(self._syncer(), _contract_id(id))
        return {"revoked": r.revoked, "receipt_id": r.receipt_id.hex(), "already": r.already}

    # ------------------------------------------------------------ devices (docs/decisions.md "15.7")
    def op_devices(self) -> dict[str, Any]:
        """The vault's devices, this one marked, and what a removed device keeps (said before removing)."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.vault import devices
        found = devices.list_devices(self._syncer())
        return {"devices": [{"id": d.device_id.hex(), "label": d.label, "added_at": d.added_at,
                             "last_sync": d.last_sync, "this_device": d.this_device} for d in found],
                "keeps": devices.WHAT_IT_KEEPS}

    async def op_device_remove(self, id: str, passphrase: str, new_passphrase: str = "") -> dict[str, Any]:
        """Remove a device, then renew the vault's keys under ``passphrase`` (checked: it must be this
        vault's, so a typo never becomes the passphrase) or, if given, ``new_passphrase``."""
        from ownmem.vault import devices  # start-up time, as above
        s = self._syncer()
        if not await devices.is_current_passphrase(s, passphrase):
            raise VaultError("that is not this vault's passphrase: nothing was removed")
        d = devices.find_device(devices.list_devices(s), id)
        try:
            await devices.remove_device_async(s, d.device_id, new_passphrase or passphrase)
        except OwnmemError as e:
            raise VaultError(f"{d.label} was removed, but the vault's keys could not be renewed ({e}): "
                             "no device can be added until the passphrase is changed") from None
        self.vault = s.v
        return {"removed": d.device_id.hex(), "label": d.label,
                "new_passphrase": bool(new_passphrase), "keeps": devices.WHAT_IT_KEEPS}

    # ------------------------------------------------------------ agents (UOMP, on `ownmem agent`)
    def op_agents(self) -> dict[str, Any]:
        """What the agent service published (ownmem.agent.published: owner-signed records only),
        and the agent writes waiting for the person (ownmem.agent.staging), from this device's
        store; the live sync keeps it current."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.agent.published import read_published
        from ownmem.usecases import requests as agent_requests
        from ownmem.usecases.staged import pending
        listing = self._open_all()
        now = int(time.time())
        pub = read_published(listing.entries, now)
        keys = self.agents
        by_id = {e.id: e for e in listing.entries}
        return {"sessions": [s.to_json() for s in pub.sessions], "agents": pub.agents, "now": now,
                "staged": [{**self._entry_json(w.entry), "agent_id": w.agent_id}
                           for w in pending(listing.entries, keys)],
                # the agents' forget and share requests (ownmem.usecases.requests), as what each would do
                "requests": [agent_requests.to_json(r, by_id) for r in agent_requests.pending(listing.entries, keys)]}

    def op_audit(self, session: str | None = None) -> dict[str, Any]:
        """The UOMP audit synced to this vault (ownmem.agent.audit_batches), newest first, optionally
        of one session; each batch shown checked against its anchor in the public log (once per
        batch while the worker runs: a proven anchor stays proven), unchecked when the log
        cannot be reached."""
        # loaded when the page asks: its reader imports the agent service's audit module and the
        # cryptography package it seals with, which the rest of the worker never needs
        from ownmem.agent.audit_batches import Batch, audit_view, log_anchor_check, log_newer_anchors, read_batches
        from ownmem.uomp.usage import last_use

        check, newer = None, None
        if self._linked() is not None:
            newer = log_newer_anchors(self._syncer())
            inner, checked = log_anchor_check(self._syncer()), self._anchors_checked

            def check(b: Batch) -> str | None:
                if b.doc["anchor"] not in checked:
                    why = inner(b)
                    if why is not None:
                        return why           # asked again next time: it may be logged by then
                    checked.add(b.doc["anchor"])
                return None
        entries = self._open_all().entries
        view = audit_view(entries, holder_id=self.v.holder().holder_id, anchor_check=check,
                          newer_anchors=newer, session=session or None)
        # each session's last use (the Agents screen's rows), over every batch whatever the filter
        used = last_use((str(e.get("session_id") or ""), str(e.get("action")), int(e.get("timestamp") or 0))
                        for b in read_batches(entries) for e in b.doc["entries"])
        out = view.to_json()
        out["last_use"] = used
        return out

    def _sync_now(self) -> tuple[bool, str | None, int]:
        """Sync at once after a change another device must learn -> (synced, problem, pending);
        offline, the change waits in the outbox."""
        try:
            return True, None, int(self.op_sync()["pending"])
        except SyncError as e:
            return False, str(e), self.store.unpushed_count()

    def op_agent_revoke(self, session_id: str) -> dict[str, Any]:
        """Revoke a session from this device: an owner-signed revocation record (the one `ownmem
        agent revoke` makes on a device without the admin credential), synced at once; the agent
        service revokes the session when its sync brings the record."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.agent.published import read_published
        from ownmem.usecases.sessions import revoke_session
        live = {s.session_id: s for s in read_published(self._open_all().entries, int(time.time())).sessions}
        s = live.get(session_id)
        if s is None:
            raise NotFound("no such agent session on this device")
        if s.status not in ("created", "active"):
            raise VaultError(f"that session is {s.status} already")
        revoke_session(self.v, session_id)
        synced, problem, pending = self._sync_now()
        return {"session_id": session_id, "synced": synced, "problem": problem, "pending": pending}

    def op_staged_confirm(self, id: str) -> dict[str, Any]:
        """Accept a staged agent write, or do what an agent's request asks, here, as `ownmem staged
        confirm` does (usecases.answers.confirm): a forget is erased from this device's cache too."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.usecases import answers
        listing = self._open_all()
        waiting = answers.find(self.v, id, listing, whole_id=True)
        done = answers.confirm(self.v, waiting, listing.entries, self._syncer)
        if done.erased:
            self._erase_from_cache()
        synced, problem, pending = self._sync_now()
        if done.request is None:
            return {"id": done.confirmation.hex(), "synced": synced, "problem": problem, "pending": pending}
        return {"id": done.confirmation.hex(), "kind": done.request.kind, "erased": done.erased,
                "contract_id": done.share.contract_id.hex() if done.share else None,
                "synced": synced, "problem": problem, "pending": pending}

    def op_staged_discard(self, id: str) -> dict[str, Any]:
        """Erase a staged agent write, or drop an agent's request, as `ownmem staged discard` does
        (usecases.answers.discard)."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.usecases import answers
        from ownmem.usecases.staged import StagedWrite
        waiting = answers.find(self.v, id, self._open_all(), whole_id=True)
        gone = answers.discard(self.v, waiting)
        self._erase_from_cache()
        synced, problem, pending = self._sync_now()
        return {"erased": gone if isinstance(waiting, StagedWrite) else 0, "synced": synced, "problem": problem,
                "pending": pending}

    # ------------------------------------------------------------ records import (UOMP section 12)
    def op_records_preview(self, data: Any, name: str = "", format: str = "", map: list[str] | None = None,
                           sensitivity: str = "", replace: bool = False) -> dict[str, Any]:
        """What `ownmem records import` would write from this file, record by record, with every
        problem; nothing is written.  A file refused as a whole (not UTF-8, no header, not JSON,
        no records) comes back with no rows and its problem under record 0."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.uomp.records import (
            RecordsRefused,
            field_names,
            format_of,
            missing_sensitivity,
            parse_map,
            target_of,
        )
        from ownmem.web.records import checked_file, records_digest
        fmt = format_of(name, format or None)
        mapping = parse_map(list(map or []))
        fields = [[n, target_of(n, mapping)] for n in field_names(bytes(data), fmt)[:MAX_RECORD_FIELDS]]
        try:
            fmt, _, checked = checked_file(self.v, self._open_all(), data, name, format, map, sensitivity, replace)
        except RecordsRefused as e:
            return {"format": fmt, "fields": fields, "rows": [], "total": 0, "valid": 0, "replacing": 0,
                    "missing_sensitivity": [], "problems": [list(p) for p in e.problems], "refused": True,
                    "digest": ""}
        problems = [[c.raw.number, m] for c in checked for m in c.problems]
        # every record with a problem, and the first PREVIEW_ROWS of the others
        rows, fine = [], 0
        for c in checked:
            if c.problems or fine < PREVIEW_ROWS:
                rows.append(c.to_json())
                fine += not c.problems
        return {"format": fmt, "fields": fields, "rows": rows, "total": len(checked),
                "valid": sum(1 for c in checked if not c.problems),
                "replacing": sum(1 for c in checked if c.exists and not c.problems),
                "missing_sensitivity": missing_sensitivity([c.raw for c in checked]),
                "problems": problems, "refused": bool(problems), "digest": records_digest(checked, replace)}

    def op_records_import(self, data: Any, digest: str, name: str = "", format: str = "",
                          map: list[str] | None = None, sensitivity: str = "", replace: bool = False) -> dict[str, Any]:
        """Write what the preview with this ``digest`` showed, with the CLI's own functions: every
        record checked again (12.9: any problem refuses the whole file, nothing written), then one
        sealed memory per record, a replaced key's live head superseded.  Progress events
        ({"event": "progress", "op", "done", "total"}) go to the page while it seals."""
        # start-up time: a later screen's modules load at its first call (docs/web.md "Start-up")
        from ownmem.uomp.records import accepted
        from ownmem.usecases.records import write_records
        from ownmem.web.records import checked_file, records_digest
        _, heads, checked = checked_file(self.v, self._open_all(), data, name, format, map, sensitivity, replace)
        if digest != records_digest(checked, replace):
            raise VaultError("the file, the choices or the vault changed since the preview: nothing was written; "
                             "look at the new preview and confirm again")
        records = accepted(checked)
        keep = heads if replace else {}
        at = int(time.time())
        ids: list[bytes] = []
        for i in range(0, len(records), RECORDS_CHUNK):
            ids += write_records(self.v, records[i:i + RECORDS_CHUNK], keep, now=at)
            self._progress("records_import", len(ids), len(records))
        return {"imported": len(ids), "replaced": sum(1 for r in records if r.key in keep),
                "defaulted": [r.number for r in records if r.sensitivity_defaulted], "sensitivity": sensitivity or None,
                "ids": [oid.hex() for oid in ids]}

    # ------------------------------------------------------------ import from ChatGPT, Claude, Gemini
    async def op_import_from(self, source: str, data: Any, commit: bool = False, digest: str = "") -> dict[str, Any]:
        """Memories from another assistant's export or a pasted list, as `ownmem import-from` does
        (usecases.import_from).  Without ``commit``: the preview (the counts, the first memories,
        the skipped ones and why) and its ``digest``, nothing written.  With ``commit``: the plan
        read again and written in one transaction, only if its digest is the preview's; progress
        events ({"event": "progress", "op": "import_from", "done", "total"}) while it seals.  A
        refused file is the error ``import_from_refused`` naming the line or item, either way."""
        # imported here: start-up time (the parsers, html.parser among them, would load with the
        # first screen under Pyodide, and most starts never import)
        from ownmem.usecases import import_from
        src = import_from.source_of(source)
        p = import_from.prepare(src, bytes(data), await self._open_all_async())
        d = import_from.digest(p)
        ids: list[bytes] = []
        if commit:
            if digest != d:
                raise VaultError("the file or the vault changed since the preview: nothing was written; "
                                 "look at the new preview and import again")
            ids = await import_from.write_async(
                self.v, p, progress=lambda done, total: self._progress("import_from", done, total))
        return {"source": src, "shape": p.shape, "tag": import_from.tag_of(src), "new": len(p.new),
                "first": [[f.where, f.text] for f in p.new[:IMPORT_FROM_SHOWN]],
                "skipped": len(p.skipped),
                "skips": [[s.where, s.text, s.why] for s in p.skipped[:IMPORT_FROM_SKIPS]],
                "digest": d, "imported": len(ids), "ids": [oid.hex() for oid in ids]}

    @staticmethod
    def _progress(op: str, done: int, total: int) -> None:
        """A progress event to the page while one long operation runs: the worker's thread is
        busy in Python, but a message posted from it reaches the page at once (client.js emits
        it; docs/web.md)."""
        try:
            import js  # Pyodide-only modules
            from pyodide.ffi import to_js  # Pyodide-only
        except ImportError:       # not in a worker (a test's plain CPython): nobody to tell
            return
        js.postMessage(to_js({"event": "progress", "op": op, "done": done, "total": total},
                             dict_converter=js.Object.fromEntries))

    def op_selftest(self, vectors: str = "") -> dict[str, Any]:
        from ownmem.web.selftest import run  # start-up time: the vector checks load when the page asks

        return run(vectors)


def _facets(j: dict[str, Any]) -> Facets:
    """What the list screen's filters read of an Entry's JSON (views/list.js, format.js isAgentWritten)."""
    trust = str(j["trust"])
    return Facets(tuple(j["tags"]), str(j["type"]), str(j["scope"]), trust,
                  j.get("source") == "agent" and trust != "unverified")


def _contract_id(text: str) -> bytes:
    t = text.strip().lower()
    if len(t) != 64 or any(ch not in "0123456789abcdef" for ch in t):
        raise MalformedInput("a contract id is 64 hex digits")
    return bytes.fromhex(t)


def slot_json(x: Slot) -> dict[str, Any]:
    """An unlock slot as the page lists it: ids in hex, never the wrap."""
    return {"id": x.slot_id.hex(), "kind": x.kind, "label": x.label, "ref": x.ref.hex(), "created": x.created}


def _raw(x: Any) -> bytes:
    """Bytes from the page: hex text, or a Uint8Array (a memoryview once converted)."""
    if isinstance(x, str):
        try:
            return bytes.fromhex(x)
        except ValueError:
            raise MalformedInput("expected hex") from None
    return bytes(x)


_app: App | None = None


def handle(op: str, args: Any) -> Any:
    """Entry point for the worker: one operation, one JSON string (or JS object, when the result
    holds bytes) back.  Without JSPI (the worker registered ``ownmem_js.ASYNC``) the answer is
    a coroutine of the same, for the worker to await."""
    try:
        fn = _operation(op, args)
    except Exception as e:  # noqa: BLE001 - the failure is the answer
        return _answer(e, None)
    if not inspect.iscoroutinefunction(fn.func):
        return _finish(fn)
    if _app is not None and _app.awaits:
        return _awaited(fn)
    return _finish(lambda: run_sync(fn()))


def _operation(op: str, args: Any) -> functools.partial[Any]:
    global _app
    if _app is None:
        import ownmem_js  # registered by the worker

        from ownmem.web.provider import BrowserProvider  # Pyodide-only: it drives the page's WebCrypto

        set_provider(BrowserProvider())
        _app = App(ownmem_js)
    if _app.store.broken is not None:
        raise _app.store.broken         # memory is ahead of IndexedDB: reload first
    kwargs = args.to_py() if args is not None and hasattr(args, "to_py") else (args or {})
    fn = getattr(_app, "op_" + op, None)
    if fn is None:
        raise VaultError(f"unknown operation {op!r}")
    return functools.partial(fn, **kwargs)


async def _awaited(fn: functools.partial[Any]) -> Any:
    try:
        result = await fn()
    except Exception as e:  # noqa: BLE001 - _answer re-raises what is not an answer
        return _answer(e, None)
    return _finish(lambda: result)


def _finish(fn: Any) -> Any:
    try:
        result = fn()
        assert _app is not None
        _app.store.flush()
    except Exception as e:  # noqa: BLE001 - _answer re-raises what is not an answer
        return _answer(e, None)
    return _answer(None, result)


def _answer(error: Exception | None, result: Any) -> Any:
    import js  # Pyodide-only modules
    from pyodide.ffi import to_js  # Pyodide-only

    if error is None:
        out: dict[str, Any] = {"ok": True, "result": result}
    elif isinstance(error, OwnmemError):
        out = {"ok": False, "error": {"code": error.code, "message": str(error)}}
    elif isinstance(error, (ValueError, TypeError)):
        out = {"ok": False, "error": {"code": "bad_request", "message": str(error).splitlines()[0][:200]}}
    else:
        raise error
    # A result without bytes crosses as one JSON string (the worker parses it): converting a
    # list of 10,000 entries value by value through the FFI costs several times more.  ASCII
    # (\u escapes): with any non-ASCII text in it, ensure_ascii=False is ~8x slower here.
    try:
        return json.dumps(out, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return to_js(out, dict_converter=js.Object.fromEntries)
