"""The `ownmem` console script, run for real as a subprocess (README "Using the CLI").

Every call goes through ``ownmem()``, which also checks two properties that hold for
every command: the passphrase never appears in stdout or stderr (draft-02 §8.3 "The
passphrase stays on the near side"), and no traceback ever reaches the terminal.
Failures are checked by ``fail()``: one ``ownmem:`` line on stderr, nothing on
stdout, a non-zero exit.

The environment of each call is built from scratch: OWNMEM_VAULT and HOME point into
the test's temporary folder, so no test can touch a real ~/.ownmem.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import Memory
from ownmem.vault import UnlockedVault, Vault, export_vault
from ownmem.vault.store import Store

PW = "Tr0ub4dor&3-never-print-me"
KEY_ID = re.compile(r"owner key ([0-9a-f]{16})\)")
HEX_ID = re.compile(r"^[0-9a-f]{32}$")

# the installed console script next to this Python (.venv/bin/ownmem); `-m` only if absent
_SCRIPT = Path(sys.executable).with_name("ownmem")
CMD = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ownmem.cli"]


# ------------------------------------------------------------------ helpers

def make_env(root: Path, *, vault: Path | None = None, passphrase: str | None = PW) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
    home = root / "home"
    home.mkdir(exist_ok=True)
    env["HOME"] = str(home)
    env["OWNMEM_VAULT"] = str(vault if vault is not None else root / "vault")
    if passphrase is not None:
        env["OWNMEM_PASSPHRASE"] = passphrase
    return env


def ownmem(*args: str, env: dict[str, str], input: str | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(CMD + list(args), env=env, capture_output=True, text=True, input=input,
                       stdin=subprocess.DEVNULL if input is None else None, timeout=120)
    for secret in {PW, env.get("OWNMEM_PASSPHRASE") or PW}:
        assert secret not in r.stdout and secret not in r.stderr, f"passphrase leaked by {args}"
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r


def ok(*args: str, env: dict[str, str], input: str | None = None) -> str:
    r = ownmem(*args, env=env, input=input)
    assert r.returncode == 0, f"{args}: exit {r.returncode}: {r.stderr}"
    return r.stdout


def fail(*args: str, env: dict[str, str]) -> str:
    """Run a command that must fail; return its single error line."""
    r = ownmem(*args, env=env)
    assert r.returncode != 0, f"{args} succeeded: {r.stdout}"
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"{args}: expected one stderr line, got {r.stderr!r}"
    assert lines[0].startswith("ownmem: "), lines[0]
    return lines[0]


def listing(*args: str, env: dict[str, str]) -> list[dict[str, Any]]:
    out = json.loads(ok("list", "--json", *args, env=env))
    assert isinstance(out, list)
    return out


def init(env: dict[str, str]) -> str:
    """`ownmem init`; returns the owner's key id as printed."""
    out = ok("init", env=env)
    m = KEY_ID.search(out)
    assert m, out
    return m.group(1)


def add(env: dict[str, str], content: str, *opts: str) -> str:
    oid = ok("add", content, *opts, env=env).strip()
    assert HEX_ID.match(oid), oid
    return oid


def by_content(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["content"]: i for i in items}


def api_vault(folder: Path) -> UnlockedVault:
    """A vault made through the Python API: setup for tests whose subject is another command."""
    return Vault.create(folder, PW)


# ------------------------------------------------------------------ a shared, read-only vault

@dataclass
class Base:
    root: Path
    env: dict[str, str]
    key_id: str
    ids: dict[str, str]          # name -> id of the three memories added through the CLI
    all_ids: list[str]
    export: Path
    t0: float


FILLER = 17   # with 20 ids, two must share a first hex digit (an ambiguous prefix)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    root = tmp_path_factory.mktemp("base")
    env = make_env(root)
    t0 = time.time()
    key_id = init(env)
    ok("scope", "add", "work", env=env)
    ids = {
        "a": add(env, "prefers formal B2B emails", "--tags", "preferences, work", "--type", "semantic",
                 "--confidence", "0.9"),
        "b": add(env, "met Alice at the Berlin conference", "--tags", "people", "--type", "episodic",
                 "--confidence", "0.6", "--scope", "work"),
        "c": add(env, "deploy with make release", "--tags", "howto", "--type", "procedural",
                 "--confidence", "0.75"),
    }
    v = Vault(root / "vault").unlock(PW)
    filler = [v.add(f"filler memory {i}", tags=["filler"]).hex() for i in range(FILLER)]
    exp = root / "base.amem"
    export_vault(v, exp)
    v.lock()
    return Base(root, env, key_id, ids, list(ids.values()) + filler, exp, t0)


def test_list_json_carries_every_field_with_correct_values(base: Base) -> None:
    items = listing(env=base.env)
    assert len(items) == 3 + FILLER
    got = by_content(items)
    a = got["prefers formal B2B emails"]
    b = got["met Alice at the Berlin conference"]
    c = got["deploy with make release"]
    assert (a["id"], a["tags"], a["type"], a["confidence"], a["scope"]) == (
        base.ids["a"], ["preferences", "work"], "semantic", 0.9, "default")
    assert (b["id"], b["tags"], b["type"], b["confidence"], b["scope"]) == (
        base.ids["b"], ["people"], "episodic", 0.6, "work")
    assert (c["id"], c["tags"], c["type"], c["confidence"], c["scope"]) == (
        base.ids["c"], ["howto"], "procedural", 0.75, "default")
    for item in items:
        assert item["trust"] == "self"
        assert item["authorship"] == "signed"
        assert item["author_key_id"] == base.key_id
        assert isinstance(item["created"], int) and base.t0 - 5 <= item["created"] <= time.time() + 5


def test_add_defaults_and_content_from_stdin(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    api_vault(tmp_path / "vault").lock()
    oid = add(env, "a plain memory")
    ok("add", "-", env=env, input="from stdin\nsecond line")
    got = by_content(listing(env=env))
    plain = got["a plain memory"]
    assert (plain["id"], plain["tags"], plain["type"], plain["confidence"], plain["scope"]) == (
        oid, [], "semantic", 0.8, "default")
    assert "from stdin\nsecond line" in got


@pytest.mark.parametrize(("filt", "expected"), [
    (("--tag", "preferences"), {"a"}),
    (("--tag", "work"), {"a"}),
    (("--type", "episodic"), {"b"}),
    (("--type", "procedural"), {"c"}),
    (("--scope", "work"), {"b"}),
    (("--trust", "unverified"), set()),
    (("--tag", "people", "--scope", "default"), set()),
])
def test_list_filters(base: Base, filt: tuple[str, ...], expected: set[str]) -> None:
    got = {i["id"] for i in listing(*filt, env=base.env)}
    assert got == {base.ids[k] for k in expected}


def test_list_filter_trust_self_and_plain_listing(base: Base) -> None:
    assert {i["id"] for i in listing("--trust", "self", env=base.env)} == set(base.all_ids)
    lines = ok("list", env=base.env).splitlines()
    assert len(lines) == 3 + FILLER
    [line] = [ln for ln in lines if ln.startswith(base.ids["a"][:12])]
    assert "self" in line and "prefers formal B2B emails" in line and "[preferences, work]" in line


def test_show_by_id_prefix(base: Base) -> None:
    out = ok("show", base.ids["b"][:8], env=base.env)
    assert base.ids["b"] in out
    assert "met Alice at the Berlin conference" in out
    assert re.search(r"trust: self$", out, re.M)
    assert re.search(rf"author key: {base.key_id}$", out, re.M)
    shown = json.loads(ok("show", "--json", base.ids["b"][:8].upper(), env=base.env))
    assert shown["id"] == base.ids["b"] and shown["scope"] == "work" and shown["trust"] == "self"


def test_search(base: Base) -> None:
    out = ok("search", "emails", env=base.env).splitlines()
    assert len(out) == 1 and out[0].startswith(base.ids["a"][:12])
    found = json.loads(ok("search", "--json", "berlin", "ALICE", env=base.env))      # every word, any case
    assert [i["id"] for i in found] == [base.ids["b"]]
    found = json.loads(ok("search", "--json", "howto", "--type", "procedural", env=base.env))  # tags too
    assert [i["id"] for i in found] == [base.ids["c"]]


# ------------------------------------------------------------------ init and the vault folder

def test_init_twice_is_a_clear_error(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    key_id = init(env)
    assert "already exists" in fail("init", env=env)
    v = Vault(tmp_path / "vault").unlock(PW)          # the first vault is untouched
    assert v.identity.key_id.hex() == key_id
    v.lock()


def test_vault_flag_overrides_env(tmp_path: Path) -> None:
    env = make_env(tmp_path)                       # OWNMEM_VAULT = tmp/vault
    other = tmp_path / "elsewhere"
    assert str(other) in ok("--vault", str(other), "init", env=env)
    assert (other / "vault.db").exists()
    assert not (tmp_path / "vault").exists()
    assert "no vault at" in fail("list", env=env)
    assert json.loads(ok("--vault", str(other), "list", "--json", env=env)) == []


def test_default_vault_is_home_dot_ownmem(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    del env["OWNMEM_VAULT"]
    home = Path(env["HOME"])
    assert str(home / ".ownmem") in ok("init", env=env)
    assert (home / ".ownmem" / "vault.db").exists()
    assert "already exists" in fail("--vault", "~/.ownmem", "init", env=env)   # ~ expands to the same


# ------------------------------------------------------------------ passphrase only from env or a TTY

@pytest.mark.parametrize("args", [("init",), ("list",), ("add", "x"), ("import", "whatever.amem")],
                         ids=["init", "list", "add", "import"])
@pytest.mark.parametrize("unset", ["absent", "empty"])
def test_no_passphrase_without_a_terminal_is_one_clear_line(base: Base, tmp_path: Path, args: tuple[str, ...],
                                                            unset: str) -> None:
    vault = tmp_path / "new" if args[0] == "init" else base.root / "vault"
    env = make_env(tmp_path, vault=vault, passphrase=None if unset == "absent" else "")
    line = fail(*args, env=env)
    assert line == "ownmem: no passphrase: set OWNMEM_PASSPHRASE or run in a terminal"
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("weak", ["password123", "qwertyuiop", "iloveyou2", "Summer2024!", "abcabcabc"])
def test_init_refuses_a_guessable_passphrase_unless_told(tmp_path: Path, weak: str) -> None:
    env = make_env(tmp_path, passphrase=weak)
    line = fail("init", env=env)
    assert "too easy to guess" in line and "--weak-passphrase" in line and weak not in line
    assert not (tmp_path / "vault" / "vault.db").exists()          # nothing created
    assert "vault created" in ok("init", "--weak-passphrase", env=env)


def test_init_refuses_the_one_letter_passphrase(tmp_path: Path) -> None:
    # "a" occurs in every message, so this one is checked without ownmem()'s leak scan
    env = make_env(tmp_path, passphrase="a")
    r = subprocess.run(CMD + ["init"], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=120)
    assert r.returncode != 0 and r.stdout == "" and "too easy to guess" in r.stderr
    assert not (tmp_path / "vault" / "vault.db").exists()


def test_vault_files_and_exports_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    # a copy of vault.db or of an export lets anyone guess the passphrase offline (§15.8)
    env = make_env(tmp_path)
    old = os.umask(0o022)          # a permissive caller: the CLI must not inherit it
    try:
        init(env)
        add(env, "a secret worth guarding")
        ok("export", str(tmp_path / "out.amem"), env=env)
    finally:
        os.umask(old)

    def mode(p: Path) -> int:
        return p.stat().st_mode & 0o777

    vault = tmp_path / "vault"
    assert mode(vault) == 0o700
    files = [f for f in vault.iterdir() if f.name.startswith("vault.db")]
    assert {f.name for f in files} >= {"vault.db"}
    assert all(mode(f) == 0o600 for f in files), {f.name: oct(mode(f)) for f in files}
    assert mode(tmp_path / "out.amem") == 0o600


def test_an_existing_world_readable_vault_is_tightened_on_open(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    api_vault(tmp_path / "vault").lock()
    os.chmod(tmp_path / "vault", 0o755)
    os.chmod(tmp_path / "vault" / "vault.db", 0o644)
    ok("list", env=env)
    assert (tmp_path / "vault").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "vault" / "vault.db").stat().st_mode & 0o777 == 0o600


def test_no_option_takes_a_passphrase(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    for cmd in ("--help", "init --help", "import --help"):
        assert "--pass" not in ok(*cmd.split(), env=env)
    # and one typed by mistake is not echoed back (ownmem() checks every output for PW)
    assert fail("init", f"--passphrase={PW}", env=env) == (
        "ownmem: unrecognized arguments: --passphrase (see `ownmem --help`)")
    assert "unrecognized arguments" in fail("list", PW, env=env)


# ------------------------------------------------------------------ edit, forget, conflicts

def test_edit_seals_a_new_head(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    v = api_vault(tmp_path / "vault")
    old = v.add("prefers formal emails", tags=["preferences"]).hex()
    v.lock()
    new = ok("edit", old[:10], "--content", "prefers formal emails, no emoji", "--tags", "style,email",
             "--type", "procedural", "--confidence", "0.3", env=env).strip()
    assert HEX_ID.match(new) and new != old
    [head] = listing(env=env)
    assert (head["id"], head["content"], head["tags"], head["type"], head["confidence"], head["supersedes"]) == (
        new, "prefers formal emails, no emoji", ["style", "email"], "procedural", 0.3, old)
    assert isinstance(head["updated"], int)
    both = {i["id"]: i for i in listing("--all", env=env)}
    assert set(both) == {old, new}
    assert both[old]["superseded_by"] == [new]
    assert (both[old]["content"], both[old]["tags"]) == ("prefers formal emails", ["preferences"])


def test_forget_erases_every_version(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    v = api_vault(tmp_path / "vault")
    keep = v.add("keep me").hex()
    old = v.add("forget me").hex()
    new = v.edit(old, content="forget me, edited").hex()
    backup = tmp_path / "before.amem"
    export_vault(v, backup)
    pieces = [b for oid in (old, new) for row in [v.store.get_object(bytes.fromhex(oid))] if row
              for b in (row.sealed, row.dek_wrapped)]
    v.lock()
    assert len(pieces) == 4

    assert "forgot 2 version(s)" in ok("forget", new[:8], env=env)
    assert [i["id"] for i in listing("--all", env=env)] == [keep]
    for oid in (old, new):
        assert "no memory with id" in fail("show", oid, env=env)

    # the versions cannot be read: neither a sealed object nor its wrapped DEK is left on disk
    store = Store(tmp_path / "vault")
    assert store.get_object(bytes.fromhex(old)) is None and store.get_object(bytes.fromhex(new)) is None
    store.close()
    on_disk = b"".join(p.read_bytes() for p in (tmp_path / "vault").iterdir() if p.is_file())
    for piece in pieces:
        assert piece not in on_disk

    # and an old export cannot revive them
    assert "imported 0, skipped 3, refused 0" in ok("import", str(backup), env=env)
    assert [i["id"] for i in listing("--all", env=env)] == [keep]


def test_concurrent_edits_are_listed_as_a_conflict(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    v = api_vault(tmp_path / "vault")
    orig = v.add("meeting on Tuesday").hex()
    v.lock()
    assert ok("conflicts", env=env).strip() == "no conflicts"
    e1 = ok("edit", orig, "--content", "meeting on Wednesday", env=env).strip()
    e2 = ok("edit", orig, "--content", "meeting on Thursday", env=env).strip()
    out = ok("conflicts", env=env).splitlines()
    assert out[0] == "conflict: 2 concurrent versions"
    assert sorted(ln.strip()[:12] for ln in out[1:]) == sorted([e1[:12], e2[:12]])
    heads = {i["id"]: i["content"] for i in listing(env=env)}       # both kept, nothing lost
    assert heads == {e1: "meeting on Wednesday", e2: "meeting on Thursday"}


# ------------------------------------------------------------------ export, import, migrate

def test_export_then_import_into_a_new_folder_adopts_the_identity(tmp_path: Path) -> None:
    v = api_vault(tmp_path / "a")
    key_id = v.identity.key_id.hex()
    v.add_scope("work")
    v.add("one", tags=["x", "y"], mem_type=1, confidence=0.1)
    v.add("two", scope="work")
    v.add("three")
    v.lock()
    src = make_env(tmp_path, vault=tmp_path / "a")
    dst = make_env(tmp_path, vault=tmp_path / "b")
    f = tmp_path / "backup.amem"
    assert ok("export", str(f), env=src).strip() == f"exported 3 object(s) to {f}"
    assert f.stat().st_size > 0 and not list(tmp_path.glob("*.tmp"))

    out = ok("import", str(f), env=dst)
    assert f"adopted the file's identity (owner key {key_id})" in out
    assert "imported 3, skipped 0, refused 0" in out
    fields = ("content", "tags", "type", "confidence", "scope", "trust", "authorship", "author_key_id", "created")
    before = {i["id"]: {k: i[k] for k in fields} for i in listing(env=src)}
    after = {i["id"]: {k: i[k] for k in fields} for i in listing(env=dst)}
    assert after == before and len(after) == 3
    assert {i["author_key_id"] for i in after.values()} == {key_id}

    again = ownmem("import", str(f), env=dst)
    assert again.returncode == 0
    assert "imported 0, skipped 3, refused 0" in again.stdout and "adopted" not in again.stdout
    w = Vault(tmp_path / "b").unlock(PW)             # the new device: same identity, same scopes
    assert w.identity.key_id.hex() == key_id and sorted(w.scopes()) == ["default", "work"]
    assert w.store.count() == 3
    w.lock()


def test_migrate_with_nothing_to_migrate(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    v = api_vault(tmp_path / "vault")
    ids = sorted(v.add(c).hex() for c in ("one", "two"))
    v.lock()
    assert ok("migrate", env=env).strip() == (
        "migrated 0, attributed 0, quarantined 0, refused 0, failed 0, already v2 2")
    assert sorted(i["id"] for i in listing(env=env)) == ids


# ------------------------------------------------------------------ trust and scopes

def _third_party_key() -> K.SigningKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    priv = Ed25519PrivateKey.generate()
    return K.SigningKey(seed=priv.private_bytes_raw(),
                        public=priv.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def test_trust_add_list_remove(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    other = _third_party_key()
    kid = hashlib.sha256(other.public).hexdigest()[:16]
    v = api_vault(tmp_path / "vault")
    v.add("mine")
    # an object signed by a third party (the vault's own sealing path, another signer)
    v._seal_into(Memory(content="written by an agent", created=int(time.time())), v.scope("default"),
                 signer=other)
    v.lock()

    r = ownmem("list", "--json", env=env)          # not accepted: excluded, and the exclusion reported
    assert [i["content"] for i in json.loads(r.stdout)] == ["mine"]
    assert "1 object(s) excluded" in r.stderr

    assert ok("trust", "add", other.public.hex().upper(), env=env).strip() == f"accepted {kid}"
    assert ok("trust", "list", env=env).split() == [kid, other.public.hex()]
    [trusted] = listing("--trust", "trusted", env=env)
    assert (trusted["content"], trusted["trust"], trusted["author_key_id"]) == (
        "written by an agent", "trusted", kid)

    assert "removed" in ok("trust", "remove", kid, env=env)
    assert ok("trust", "list", env=env) == ""
    # revoked: it no longer opens as trusted, only as unverified on explicit opt-in
    [unv] = json.loads(ok("list", "--json", "--include-unverified", "--trust", "unverified", env=env))
    assert unv["content"] == "written by an agent"
    assert "no accepted key" in fail("trust", "remove", kid, env=env)


def test_show_and_search_hide_unverified_objects_unless_asked(tmp_path: Path) -> None:
    # ApertoMemory "Opening a sealed object": unverified content is shown only on an explicit opt-in
    env = make_env(tmp_path)
    v = api_vault(tmp_path / "vault")
    so = v._seal_into(Memory(content="planted by a stranger", created=int(time.time())), v.scope("default"),
                      signer=_third_party_key())
    v.lock()
    oid = so.object_id.hex()
    assert "--include-unverified" in fail("show", oid, env=env)
    assert ok("search", "planted", "--json", env=env).strip() == "[]"
    shown = json.loads(ok("show", oid, "--json", "--include-unverified", env=env))
    assert (shown["content"], shown["trust"]) == ("planted by a stranger", "unverified")
    [found] = json.loads(ok("search", "planted", "--json", "--include-unverified", env=env))
    assert found["trust"] == "unverified"
    text = ok("show", oid, "--include-unverified", env=env)
    assert "unverified" in text and "not your own" in text


def test_scope_add_list(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    api_vault(tmp_path / "vault").lock()
    assert ok("scope", "add", "health", env=env).strip() == "scope 'health' created"
    assert ok("scope", "list", env=env).split() == ["default", "health"]
    oid = add(env, "allergic to penicillin", "--scope", "health")
    assert [(i["id"], i["scope"]) for i in listing("--scope", "health", env=env)] == [(oid, "health")]


# ------------------------------------------------------------------ every failure: one line, no traceback

@dataclass
class Fixtures:
    base: Base
    fresh: Path            # a folder with no vault
    files: dict[str, Path]


@pytest.fixture(scope="module")
def fx(base: Base, tmp_path_factory: pytest.TempPathFactory) -> Fixtures:
    d = tmp_path_factory.mktemp("files")
    good = base.export.read_bytes()
    files = {
        "random": d / "random.amem",
        "truncated": d / "truncated.amem",
        "truncated_tail": d / "truncated_tail.amem",
        "text": d / "notes.amem",
        "empty": d / "empty.amem",
        "cbor": d / "cbor.amem",
        "other": d / "other.amem",
        "a_file": d / "plain-file",
        "a_dir": d / "a-dir",
    }
    files["random"].write_bytes(os.urandom(4096))
    files["truncated"].write_bytes(good[: len(good) // 2])
    files["truncated_tail"].write_bytes(good[:-1])
    files["text"].write_text("these are my notes, not an .amem export\n")
    files["empty"].write_bytes(b"")
    files["cbor"].write_bytes(b"\xa1\x01\x02")          # well-formed CBOR, not a container
    files["a_file"].write_text("x")
    files["a_dir"].mkdir()
    # same passphrase, different salt: another identity, so the holdership proof passes
    # and identity separation is what must refuse it
    other = Vault.create(d / "other-vault", PW)
    other.add("not yours")
    export_vault(other, files["other"])
    other.lock()
    return Fixtures(base, d / "no-vault-here", files)


Case = Callable[[Fixtures], tuple[list[str], dict[str, str]]]


def _in_base(*args: str) -> Case:
    return lambda fx: (list(args), fx.base.env)


def _import_fresh(name: str) -> Case:
    return lambda fx: (["import", str(fx.files[name])], make_env(fx.fresh.parent, vault=fx.fresh))


def _ambiguous(fx: Fixtures) -> tuple[list[str], dict[str, str]]:
    firsts = [i[0] for i in fx.base.all_ids]
    prefix = next(c for c in firsts if firsts.count(c) > 1)
    return ["show", prefix], fx.base.env


FAILURES: dict[str, tuple[Case, str]] = {
    "wrong_passphrase": (lambda fx: (["list"], {**fx.base.env, "OWNMEM_PASSPHRASE": "not-the-passphrase"}),
                         "wrong passphrase"),
    "wrong_passphrase_import": (lambda fx: (["import", str(fx.base.export)],
                                            {**make_env(fx.fresh.parent, vault=fx.fresh),
                                             "OWNMEM_PASSPHRASE": "not-the-passphrase"}), "wrong passphrase"),
    "no_vault": (lambda fx: (["list"], make_env(fx.fresh.parent, vault=fx.fresh)), "no vault at"),
    "unknown_id_show": (_in_base("show", "0" * 32), "no memory with id"),
    "unknown_id_edit": (_in_base("edit", "0" * 32, "--content", "x"), "no memory with id"),
    "unknown_id_forget": (_in_base("forget", "0" * 32), "no memory with id"),
    "ambiguous_prefix": (_ambiguous, "ambiguous"),
    "edit_nothing": (lambda fx: (["edit", fx.base.ids["a"]], fx.base.env), "nothing to change"),
    "empty_content": (_in_base("add", ""), "content"),
    "confidence_2": (_in_base("add", "x", "--confidence", "2"), "confidence"),
    "confidence_negative": (_in_base("add", "x", "--confidence", "-0.1"), "confidence"),
    "confidence_nan": (_in_base("add", "x", "--confidence", "nan"), "confidence"),
    "confidence_inf": (_in_base("add", "x", "--confidence", "inf"), "confidence"),
    "confidence_abc": (_in_base("add", "x", "--confidence", "abc"), "not a number"),
    "edit_confidence_2": (lambda fx: (["edit", fx.base.ids["a"], "--confidence", "2"], fx.base.env),
                          "confidence"),
    "unknown_type": (_in_base("add", "x", "--type", "dream"), "invalid choice"),
    "unknown_scope": (_in_base("add", "x", "--scope", "nope"), "no scope named"),
    "duplicate_scope": (_in_base("scope", "add", "work"), "already exists"),
    "unknown_command": (_in_base("frobnicate"), "invalid choice"),
    "no_command": (_in_base(), "required"),
    "corrupt_random_bytes": (_import_fresh("random"), "corrupt"),
    "corrupt_truncated_half": (_import_fresh("truncated"), "corrupt"),
    "corrupt_truncated_last_byte": (_import_fresh("truncated_tail"), "corrupt"),
    "corrupt_text_file": (_import_fresh("text"), "corrupt"),
    "corrupt_empty_file": (_import_fresh("empty"), "corrupt"),
    "corrupt_cbor_not_a_container": (_import_fresh("cbor"), "corrupt"),
    "corrupt_into_existing": (lambda fx: (["import", str(fx.files["truncated"])], fx.base.env), "corrupt"),
    "other_identity": (lambda fx: (["import", str(fx.files["other"])], fx.base.env), "different identity"),
    "missing_file": (lambda fx: (["import", str(fx.files["a_dir"] / "missing.amem")], fx.base.env),
                     "cannot read"),
    "import_a_directory": (lambda fx: (["import", str(fx.files["a_dir"])], fx.base.env), "cannot read"),
    "export_parent_is_a_file": (lambda fx: (["export", str(fx.files["a_file"] / "x.amem")], fx.base.env),
                                "cannot write"),
    "export_parent_missing": (lambda fx: (["export", str(fx.files["a_dir"] / "no" / "x.amem")], fx.base.env),
                              "cannot write"),
    "export_onto_a_directory": (lambda fx: (["export", str(fx.files["a_dir"])], fx.base.env), "cannot write"),
    "trust_add_bad_hex": (_in_base("trust", "add", "zz-not-hex"), "hex"),
    "trust_add_short_key": (_in_base("trust", "add", "abcd"), "32-byte"),
    "trust_add_no_key": (_in_base("trust", "add"), "needs a key"),
    "trust_remove_bad_hex": (_in_base("trust", "remove", "xyz"), "hex"),
}


@pytest.mark.parametrize("case", list(FAILURES), ids=list(FAILURES))
def test_failure_is_one_line_without_traceback(fx: Fixtures, case: str) -> None:
    make, expect = FAILURES[case]
    args, env = make(fx)
    line = fail(*args, env=env)
    assert expect in line, line
    # nothing was written: a failed import never creates a vault, a failed export leaves no file
    assert not fx.fresh.exists()
    assert list(fx.files["a_dir"].iterdir()) == []
    assert not list(fx.files["a_dir"].parent.glob("*.tmp"))


def test_failures_leave_the_vault_unchanged(fx: Fixtures) -> None:
    """Run after the parametrized failures (module order): the shared vault is intact."""
    items = listing(env=fx.base.env)
    assert sorted(i["id"] for i in items) == sorted(fx.base.all_ids)
    assert {i["author_key_id"] for i in items} == {fx.base.key_id}
    assert ok("scope", "list", env=fx.base.env).split() == ["default", "work"]


def test_trust_add_own_key_is_refused(tmp_path: Path) -> None:
    v = api_vault(tmp_path / "vault")
    own = v.identity.sign_pub.hex()
    v.lock()
    assert "own key" in fail("trust", "add", own, env=make_env(tmp_path))


# ------------------------------------------------------------------ no secret in any output

def test_passphrase_never_appears_in_any_output(tmp_path: Path) -> None:
    """A whole session; ``ownmem()`` already checks each call, this one collects them all."""
    env = make_env(tmp_path)
    seen: list[str] = []

    def run(*args: str, e: dict[str, str] = env) -> str:
        r = ownmem(*args, env=e)
        seen.extend([r.stdout, r.stderr])
        return r.stdout

    run("init")
    oid = run("add", "remember the milk", "--tags", "errands").strip()
    run("list"), run("show", "--json", oid)
    new = run("edit", oid, "--content", "remember the oat milk").strip()
    run("trust", "add", _third_party_key().public.hex()), run("trust", "list")
    run("export", str(tmp_path / "x.amem"))
    run("import", str(tmp_path / "x.amem"), e=make_env(tmp_path, vault=tmp_path / "second"))
    run("migrate"), run("forget", new)
    run("list", e={**env, "OWNMEM_PASSPHRASE": PW + "x"})          # wrong passphrase, near-miss
    run("import", str(tmp_path / "x.amem"), e={**make_env(tmp_path, vault=tmp_path / "third"),
                                               "OWNMEM_PASSPHRASE": PW[:-1]})
    everything = "".join(seen)
    assert PW not in everything and PW[:-1] not in everything and PW + "x" not in everything
    assert "adopted the file's identity" in everything      # the session really ran


# ------------------------------------------------------------------ progress on a terminal only

def run_in_pty(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    """Run with stdin, stdout and stderr on a pseudo-terminal; returns (exit, all output)."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(CMD + args, stdin=slave, stdout=slave, stderr=slave, env=env,
                                close_fds=True, start_new_session=True)
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:          # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    rc = proc.wait(timeout=10)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert PW not in out and "Traceback" not in out
    return rc, out


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_progress_on_a_terminal_and_silence_when_piped(tmp_path: Path) -> None:
    n = 2000
    src = tmp_path / "big"
    v = Vault.create(src, PW)
    for i in range(n):
        v.add(f"memory number {i}", tags=["bulk"], now=1_700_000_000 + i)
    v.lock()
    env = make_env(tmp_path, vault=src)
    f = tmp_path / "big.amem"

    rc, out = run_in_pty(["export", str(f)], env)
    assert rc == 0, out
    assert f"export: {n}/{n} (100%)" in out
    assert f"exported {n} object(s)" in out

    rc, out = run_in_pty(["import", str(f)], make_env(tmp_path, vault=tmp_path / "tty-import"))
    assert rc == 0, out
    assert f"import: {n}/{n} (100%)" in out
    assert f"imported {n}, skipped 0, refused 0" in out

    # piped: the same commands print their result and no progress at all
    piped = ownmem("export", str(tmp_path / "piped.amem"), env=env)
    assert piped.returncode == 0
    assert piped.stderr == "" and "\r" not in piped.stdout and "export:" not in piped.stdout
    piped = ownmem("import", str(f), env=make_env(tmp_path, vault=tmp_path / "piped-import"))
    assert piped.returncode == 0
    assert f"imported {n}, skipped 0, refused 0" in piped.stdout
    assert piped.stderr == "" and "\r" not in piped.stdout and "import:" not in piped.stdout + piped.stderr


# ------------------------------------------------------------------ interop with the reference

def test_reference_amem_imports_and_lists_as_self(tmp_path: Path) -> None:
    amem_vault = pytest.importorskip("amem.vault")
    amem_objects = pytest.importorskip("amem.objects")
    ref = amem_vault.Vault.init(tmp_path / "ref", PW)
    ref.add_scope("default", PW)
    made = {
        ref.seal_object(amem_objects.MemoryObject(content="reference memory one", tags=["ref", "a"],
                                                  mem_type="episodic", confidence=0.5), "default", PW),
        ref.seal_object(amem_objects.MemoryObject(content="reference memory two", mem_type="procedural",
                                                  confidence=1.0), "default", PW),
    }
    f = tmp_path / "ref.amem"
    assert ref.export(f) == 2
    ref_kid = hashlib.sha256(ref.unlock(PW).sign_pub).hexdigest()[:16]

    env = make_env(tmp_path, vault=tmp_path / "mine")
    r = ownmem("import", str(f), env=env)
    assert r.returncode == 0, r.stderr
    assert f"adopted the file's identity (owner key {ref_kid})" in r.stdout
    assert "imported 2, skipped 0, refused 0" in r.stdout
    assert r.stderr.count("\n") <= 1            # at most the one note: the reference signs no metadata

    items = by_content(listing(env=env))
    assert {i["id"] for i in items.values()} == made
    one, two = items["reference memory one"], items["reference memory two"]
    assert (one["type"], one["confidence"], one["tags"]) == ("episodic", 0.5, ["ref", "a"])
    assert (two["type"], two["confidence"], two["tags"]) == ("procedural", 1.0, [])
    for i in (one, two):
        assert (i["trust"], i["authorship"], i["author_key_id"], i["scope"]) == (
            "self", "signed", ref_kid, "default")
