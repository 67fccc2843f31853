"""Several devices of one vault, synced through a real server process (DESIGN.md "Sync",
"Objects are immutable", "One memory, three views": cryptographic erasure).

SQLite for the single-process properties; one PostgreSQL case runs the devices against
two server processes sharing one database.  The CLI flow (`ownmem login`, `ownmem
sync`, `ownmem conflicts`) runs as real subprocesses.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Memory, Trust
from ownmem.crypto import provider, run_sync
from ownmem.errors import WrongPassphrase
from ownmem.vault import DEFAULT_SCOPE
from ownmem.vault.metadata import parse_metadata
from tests.sync.synckit import WRONG_PASSPHRASE, Backend, Device, Devices, ServerProcess, cli_env, ownmem


@pytest.fixture(scope="module")
def url(sqlite_backend: Backend) -> Iterator[str]:
    s = ServerProcess(sqlite_backend, label="devices")
    try:
        yield s.start().url
    finally:
        s.stop()


@pytest.fixture(scope="module")
def agent_key() -> K.SigningKey:
    """A third-party author key (an agent's)."""
    return run_sync(K.signing_key(provider(), bytes(range(40, 72))))


def _pair(devices: Devices, url_a: str, name: str, url_b: str | None = None) -> tuple[Device, Device]:
    a = devices.first(url_a, name)
    return a, devices.join(url_b or url_a, name)


def _at_once(*fns: Callable[[], object]) -> None:
    """Run the calls concurrently (released together), re-raising the first failure."""
    errors: list[BaseException] = []
    go = threading.Barrier(len(fns))

    def run(fn: Callable[[], object]) -> None:
        try:
            go.wait()
            fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f,)) for f in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]


def _authored_by(d: Device, signer: K.SigningKey, content: str) -> bytes:
    """A memory written into this vault under another author key (how an agent writes)."""
    return d.v._seal_into(Memory(content=content, created=1_700_000_000, tool="agent/1"),
                          d.v.scope(DEFAULT_SCOPE), signer=signer).object_id


def _trust_of(d: Device, oid: bytes) -> Trust | None:
    """How the object opens on this device now: its trust, or None when refused."""
    listing = d.listing()
    for e in listing.entries:
        if e.id == oid:
            return e.opened.trust
    assert oid in {r for r, _ in listing.refused}
    return None


def _concurrent_edit(a: Device, b: Device) -> tuple[bytes, str, str]:
    base = a.v.add("the meeting is on Tuesday", tags=["work"])
    a.sync()
    b.sync()
    a.v.edit(base.hex(), content="the meeting moved to Wednesday")
    b.v.edit(base.hex(), content="the meeting is cancelled")
    _at_once(a.sync, b.sync)                 # both push at the same moment
    a.sync()
    b.sync()
    return base, "the meeting moved to Wednesday", "the meeting is cancelled"


def _assert_conflict_kept(d: Device, base: bytes, *versions: str) -> None:
    listing = d.listing()
    assert listing.refused == []
    (group,) = listing.conflicts()
    assert sorted(e.opened.content for e in group) == sorted(versions)
    assert all(e.supersedes == base and e.is_head for e in group)
    heads = {e.opened.content for e in listing.heads()}
    assert set(versions) <= heads and "the meeting is on Tuesday" not in heads
    assert "the meeting is on Tuesday" in {e.opened.content for e in listing.entries}  # history kept too


# ------------------------------------------------------------------ concurrent edits


def test_concurrent_edits_keep_both_versions_as_a_conflict_on_both_devices(url: str, devices: Devices) -> None:
    a, b = _pair(devices, url, "edits")
    base, va, vb = _concurrent_edit(a, b)
    for d in (a, b):
        _assert_conflict_kept(d, base, va, vb)
    assert a.v.store.object_ids() == b.v.store.object_ids()


def test_conflicts_command_shows_both_versions_on_both_devices(url: str, devices: Devices,
                                                               tmp_path: Path) -> None:
    a, b = _pair(devices, url, "edits-cli")
    _, va, vb = _concurrent_edit(a, b)
    for d in (a, b):
        r = ownmem("conflicts", env=cli_env(tmp_path, d.folder))
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == "conflict: 2 concurrent versions"
        assert len(lines) == 3 and any(va in x for x in lines) and any(vb in x for x in lines)
    r = ownmem("sync", env=cli_env(tmp_path, b.folder))
    assert r.returncode == 0, r.stderr
    assert "1 conflict(s): see `ownmem conflicts`" in r.stdout


# ------------------------------------------------------------------ erasure


def _file_bytes(folder: Path, name: str) -> bytes:
    return b"".join(p.read_bytes() for p in folder.glob(name + "*") if p.is_file())


def test_erasure_on_one_device_destroys_the_dek_on_the_other(url: str, devices: Devices,
                                                              sqlite_backend: Backend) -> None:
    a, b = _pair(devices, url, "erasure")
    keep = a.v.add("keep this one")
    doomed = a.v.add("forget this one", tags=["private"])
    a.sync()
    b.sync()
    row = b.v.store.get_object(doomed)
    assert row is not None and b.v.store.get_object(keep) is not None
    ciphertext_tail = row.sealed[-64:]          # inside the AEAD ciphertext and tag
    assert row.dek_wrapped in _file_bytes(b.folder, "vault.db")         # the search sees it before
    assert row.dek_wrapped in _file_bytes(sqlite_backend.data_dir, "ownmem.db")

    a.v.forget(doomed.hex())
    report = a.sync()
    assert report.erased_remote == 1
    report = b.sync()
    assert report.erased_here == 1

    assert b.v.store.get_object(doomed) is None and b.v.store.get_object(keep) is not None
    assert doomed in b.v.store.erased_ids()
    assert [e.opened.content for e in b.listing().entries] == ["keep this one"]
    for where in (_file_bytes(b.folder, "vault.db"), _file_bytes(a.folder, "vault.db"),
                  _file_bytes(sqlite_backend.data_dir, "ownmem.db")):
        assert row.dek_wrapped not in where
        assert ciphertext_tail not in where

    b.sync()                                     # a later sync does not bring it back
    assert b.v.store.get_object(doomed) is None


def test_a_memory_forgotten_on_two_devices_is_confirmed_on_both(url: str, devices: Devices,
                                                                sqlite_backend: Backend) -> None:
    """Both devices forget it before either syncs: the server logs the first FORGET and answers
    the second "already", so the second device's own receipt is never logged.  It confirms the
    erasure by the first device's receipt, proven in the log: its outbox empties, no refusal."""
    a, b = _pair(devices, url, "erased-twice")
    doomed = a.v.add("forgotten on both devices")
    a.sync()
    b.sync()
    (cid, _), = [a.v.store.cell_of(doomed) or (b"", b"")]
    a.v.forget(doomed.hex())
    b.v.forget(doomed.hex())
    assert a.v.store.erase_receipt(cid) != b.v.store.erase_receipt(cid)     # two receipts
    first = a.sync()
    assert first.erased_remote == 1 and first.refusals == []
    second = b.sync()
    assert second.refusals == [] and second.erased_remote == 0
    assert a.v.store.erase_outbox() == [] and b.v.store.erase_outbox() == []
    assert sqlite_backend.rows("SELECT count(*) FROM cells WHERE cell_id = ?", (cid,)) == [(0,)]


# ------------------------------------------------------------------ metadata: scopes and keys


def test_scope_added_on_one_device_appears_on_the_other(url: str, devices: Devices) -> None:
    a, b = _pair(devices, url, "scopes")
    work = a.v.add_scope("work")
    oid = a.v.add("quarterly numbers are due", scope="work")
    a.sync()
    assert "work" not in b.v.scopes()
    b.sync()
    assert b.v.scopes()["work"] == work
    (e,) = [e for e in b.listing().entries if e.id == oid]
    assert (e.scope, e.opened.content, e.opened.trust) == ("work", "quarterly numbers are due", Trust.SELF)
    b.v.add("written on B into work", scope="work")
    b.sync()
    a.sync()
    assert "written on B into work" in a.contents()


def test_one_scope_name_created_on_two_devices_converges_and_every_memory_opens(
        url: str, devices: Devices) -> None:
    """Both devices create "work" offline: two scopes, one name.  Sync must settle (it used
    to rewrite the server's metadata on every sync, forever, hiding the conflict) and keep
    both scopes on both devices, so no memory becomes unreadable anywhere."""
    a, b = _pair(devices, url, "scope-clash")
    work_a, work_b = a.v.add_scope("work"), b.v.add_scope("work")
    a.v.add("A's work memory", scope="work")
    b.v.add("B's work memory", scope="work")
    ra = a.sync()
    rb = b.sync()
    assert rb.scope_conflicts == ["work"]            # the person is told
    a.sync()
    versions = {a.sync().metadata_version, b.sync().metadata_version, a.sync().metadata_version,
                b.sync().metadata_version}
    assert len(versions) == 1, "the metadata never settles"
    assert ra.metadata_version <= versions.pop()
    for d in (a, b):
        listing = d.listing()
        assert listing.refused == []
        assert {e.opened.content for e in listing.entries} == {"A's work memory", "B's work memory"}
        scopes = d.v.scopes()
        assert {s.scope_id for s in scopes.values()} >= {work_a.scope_id, work_b.scope_id}
    assert a.v.scopes() == b.v.scopes()


def test_trusted_key_added_on_one_device_is_accepted_on_the_other(url: str, devices: Devices,
                                                                  agent_key: K.SigningKey) -> None:
    a, b = _pair(devices, url, "trust-add")
    oid = _authored_by(a, agent_key, "the agent noted a preference for tea")
    a.sync()
    b.sync()
    assert _trust_of(b, oid) is None              # fail closed: not accepted yet
    kid = a.v.trust_add(agent_key.public)
    a.sync()
    b.sync()
    assert b.v.store.known_keys() == {kid: agent_key.public}
    assert _trust_of(b, oid) is Trust.TRUSTED


def test_trust_removed_on_one_device_is_revoked_on_the_other_and_stays_revoked(
        url: str, devices: Devices, agent_key: K.SigningKey) -> None:
    a, b = _pair(devices, url, "trust-remove")
    kid = a.v.trust_add(agent_key.public)
    on_a = _authored_by(a, agent_key, "written by the agent through device A")
    a.sync()
    b.sync()
    on_b = _authored_by(b, agent_key, "written by the agent through device B")
    b.sync()
    a.sync()
    assert {_trust_of(d, o) for d in (a, b) for o in (on_a, on_b)} == {Trust.TRUSTED}

    a.v.trust_remove(kid)
    a.sync()
    b.sync()
    for _ in range(2):                            # later syncs of either device do not undo it
        for d in (b, a):
            assert d.sync().metadata_version >= 1
            assert kid not in d.v.store.known_keys() and kid in d.v.store.revoked_keys()
            assert _trust_of(d, on_a) is None and _trust_of(d, on_b) is None
            unverified = {e.id: e.opened.trust for e in d.listing(allow_unverified=True).entries}
            assert unverified[on_a] is unverified[on_b] is Trust.UNVERIFIED
    meta = parse_metadata(b.remote.get_metadata().metadata)
    assert kid in meta.revoked and kid not in meta.vault_public.known_keys


def test_key_trusted_again_after_revocation_is_accepted_everywhere(url: str, devices: Devices,
                                                                  agent_key: K.SigningKey) -> None:
    a, b = _pair(devices, url, "trust-again")
    kid = a.v.trust_add(agent_key.public)
    oid = _authored_by(a, agent_key, "the agent's note")
    a.sync()
    a.v.trust_remove(kid)
    a.sync()
    b.sync()
    assert _trust_of(b, oid) is None
    a.v.trust_add(agent_key.public)                # the person changed their mind, explicitly
    a.sync()
    assert _trust_of(a, oid) is Trust.TRUSTED      # a's own sync must not silently revoke it again
    b.sync()
    assert _trust_of(b, oid) is Trust.TRUSTED
    b.sync()
    a.sync()
    assert _trust_of(a, oid) is _trust_of(b, oid) is Trust.TRUSTED


# ------------------------------------------------------------------ new devices


def test_new_device_with_a_wrong_passphrase_fails_cleanly_and_creates_nothing(
        url: str, devices: Devices, tmp_path: Path) -> None:
    a = devices.first(url, "wrong-pw")
    a.v.add("something")
    a.sync()
    before = a.remote.changes(0).last_seq
    folder = tmp_path / "phone"
    with pytest.raises(WrongPassphrase) as e:
        devices.join(url, "wrong-pw", passphrase=WRONG_PASSPHRASE)
    assert WRONG_PASSPHRASE not in str(e.value)
    # a name nobody holds answers as a vault would, with a decoy's keys (docs/decisions.md, "Names
    # cannot be probed by lookup"): the passphrase derives other keys, as a wrong passphrase does
    with pytest.raises(WrongPassphrase):
        devices.join(url, "no-such-vault")
    assert not any(devices.root.glob("*-b")), "a failed login left a folder behind"
    assert not folder.exists()
    assert a.remote.changes(0).last_seq == before

    env = cli_env(tmp_path, folder, WRONG_PASSPHRASE)
    r = ownmem("login", "--server", url, "--vault-name", "wrong-pw", env=env)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("ownmem: wrong passphrase") and len(r.stderr.splitlines()) == 1
    assert not folder.exists()

    r = ownmem("login", "--server", "http://127.0.0.1:9", "--vault-name", "wrong-pw", env=env)   # no server
    assert r.returncode == 1 and r.stderr.startswith("ownmem: cannot reach the server") and not folder.exists()


def test_cli_login_and_sync_end_to_end(url: str, tmp_path: Path) -> None:
    env_a = cli_env(tmp_path, tmp_path / "laptop")
    env_b = cli_env(tmp_path, tmp_path / "phone")

    def ok(*args: str, env: dict[str, str]) -> str:
        r = ownmem(*args, env=env)
        assert r.returncode == 0, (args, r.stderr)
        return r.stdout

    ok("init", env=env_a)
    ok("add", "written on the laptop", "--tags", "cli", env=env_a)
    assert "linked" in ok("login", "--server", url, "--vault-name", "cli-flow", env=env_a)
    assert ok("sync", env=env_a).strip() == "synced: pushed 1, pulled 0"

    assert "with 1 object(s)" in ok("login", "--server", url, "--vault-name", "cli-flow", env=env_b)
    (m,) = json.loads(ok("list", "--json", env=env_b))
    assert (m["content"], m["tags"], m["trust"]) == ("written on the laptop", ["cli"], "self")

    ok("add", "written on the phone", env=env_b)
    assert ok("sync", env=env_b).strip() == "synced: pushed 1, pulled 0"
    assert ok("sync", env=env_a).strip() == "synced: pushed 0, pulled 1"
    assert {m["content"] for m in json.loads(ok("list", "--json", env=env_a))} == {
        "written on the laptop", "written on the phone"}
    assert ok("sync", env=env_b).strip() == "synced: pushed 0, pulled 0"

    r = ownmem("login", "--server", url, "--vault-name", "cli-flow", env=env_b)   # already there: re-link
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ two server processes (PostgreSQL)


def test_devices_on_two_server_processes_converge(pg_backend: Backend, servers: Callable[..., ServerProcess],
                                                  devices: Devices, agent_key: K.SigningKey) -> None:
    one, two = servers(pg_backend, label="one"), servers(pg_backend, label="two")
    a, b = _pair(devices, one.url, "two-procs", two.url)

    base, va, vb = _concurrent_edit(a, b)
    for d in (a, b):
        _assert_conflict_kept(d, base, va, vb)

    kid = a.v.trust_add(agent_key.public)
    oid = _authored_by(b, agent_key, "an agent wrote this via B")
    doomed = b.v.add("forget me everywhere")
    _at_once(a.sync, b.sync)
    a.sync()
    b.sync()
    assert _trust_of(a, oid) is _trust_of(b, oid) is Trust.TRUSTED

    a.v.trust_remove(kid)
    b.v.forget(doomed.hex())
    _at_once(a.sync, b.sync)
    a.sync()
    b.sync()
    for d in (a, b):
        assert _trust_of(d, oid) is None
        assert d.v.store.get_object(doomed) is None and doomed in d.v.store.erased_ids()
    assert a.v.store.object_ids() == b.v.store.object_ids()
