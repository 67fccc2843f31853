"""The pure parts of "a SAIHM credential is a UOMP session" (issue 19 item 1): the ``*`` grant and
the SAIHM acts in guard.decide, how a plain memory is judged as an Item, the session a credential
is, what reconciling the session store with the credentials file does, and the credentials file
of an older version read as migrated."""
from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ownmem.agent.credentials import FILENAME, Credential, CredentialFile, token_digest
from ownmem.agent.guarded import (
    DEFAULT_SENSITIVITY,
    KIND,
    claims_of,
    memory_item,
    reconcile,
    session_for,
    token_hash_of,
)
from ownmem.errors import MalformedInput, NotFound
from ownmem.uomp.guard import Request, SessionState, decide
from ownmem.uomp.items import Item
from ownmem.uomp.tokens import Claims, Scope, Scopes, token_hash
from ownmem.usecases.items import put_item

NOW = int(time.time())
AUD = "http://127.0.0.1:9374"
LIVE = SessionState("active", True, False, 0, 0)


def item(key: str, tags: tuple[str, ...] = (), sens: str = "low") -> Item:
    return Item(key, None, tags, sens, "user", NOW, NOW, None, key.encode())


NO_SCOPE = Scope()


def claims(read: Scope, write: Scope = NO_SCOPE) -> Claims:
    return Claims("sess_saihm_0", "claude.0", NOW - 10, NOW + 600, Scopes(read, write), audience=AUD)


def req(path: str, **kw: Any) -> Request:
    return Request(path, audience=AUD, **kw)


def test_the_any_tag_grant_is_every_tag_and_untagged_memory_minus_denials_and_never_high_by_query() -> None:
    c = claims(Scope(tags=("*",), deny_tags=("health",), deny_keys=("k.denied",)))
    q = req("query", key="anything")
    assert decide(c, LIVE, q, item("k.untagged")).allowed
    assert decide(c, LIVE, q, item("k.tagged", ("travel", "x"))).allowed
    assert decide(c, LIVE, q, item("k.health", ("travel", "health"))).reason == "item carries a denied tag"
    assert decide(c, LIVE, q, item("k.denied")).reason == "key explicitly denied"
    for sens in ("high",):
        assert decide(c, LIVE, q, item("k.high", ("travel",), sens)).reason == \
            "high-sensitivity item outside an exact-key read"
        # not by a tag read either, nor by a key read: "*" names no key
        assert not decide(c, LIVE, req("tag", tag="travel"), item("k.high", ("travel",), sens)).allowed
        assert not decide(c, LIVE, req("key", key="k.high"), item("k.high", ("travel",), sens)).allowed
    # one tag: only that tag's items; untagged ones are not in it
    one = claims(Scope(tags=("travel",)))
    assert decide(one, LIVE, q, item("k.t", ("travel",))).allowed
    assert not decide(one, LIVE, q, item("k.u")).allowed
    assert not decide(one, LIVE, q, item("k.w", ("work",))).allowed


def test_the_saihm_acts_need_the_write_grant_and_forget_and_share_name_a_visible_item() -> None:
    ro = claims(Scope(tags=("*",)))
    rw = claims(Scope(tags=("travel",)), Scope(tags=("*",)))
    for path in ("stage", "forget", "share", "unshare"):
        d = decide(ro, LIVE, req(path), item("k", ("travel",)))
        assert (d.allowed, d.code, d.reason) == (False, "ACCESS_DENIED", "writes not within granted scope"), path
    assert decide(rw, LIVE, req("stage")).allowed and decide(rw, LIVE, req("unshare")).allowed
    assert decide(rw, LIVE, req("forget")).code == "NOT_FOUND"
    assert decide(rw, LIVE, req("forget"), item("k", ("travel",))).allowed
    assert decide(rw, LIVE, req("share"), item("k", ("work",))).reason == "key not within granted scope"
    assert not decide(rw, LIVE, req("forget"), item("k", ("travel",), "high")).allowed
    # the UOMP routes' own writes stay unserved, whatever the grant
    assert decide(rw, LIVE, req("write", key="k")).code == "WRITE_NOT_AVAILABLE"
    # and a revoked session is refused before any of it
    assert decide(rw, replace(LIVE, status="revoked"), req("stage")).code == "SESSION_REVOKED"


def test_a_plain_memory_is_judged_by_its_object_id_its_tags_and_a_default_that_is_not_high(tmp_path: Path) -> None:
    from ownmem.vault import Vault

    v = Vault.create(tmp_path / "v", "guarded units: a green lantern at dusk 4")
    try:
        plain = v.add("the person walks at dawn", tags=("habit",))
        named = v.add("a note saying how sensitive it is", extensions={"uomp": {"sensitivity": "high"}})
        keyed = put_item(v, "user.pin", "1234", tags=("identity",), sensitivity="high")
        unnamed = put_item(v, "user.color", "teal", tags=("identity",), sensitivity="low")
        by_id = {e.id: e for e in v.open_all().entries}
        p = memory_item(by_id[plain])
        assert (p.key, p.tags, p.sensitivity) == (plain.hex(), ("habit",), DEFAULT_SENSITIVITY)
        assert DEFAULT_SENSITIVITY != "high"
        assert memory_item(by_id[named]).sensitivity == "high"
        k = memory_item(by_id[keyed])
        assert (k.key, k.tags, k.sensitivity) == ("user.pin", ("identity",), "high")
        assert memory_item(by_id[unnamed]).sensitivity == "low"
    finally:
        v.close()


def _cred(**kw: Any) -> Credential:
    base = Credential("claude", token_digest("om_agent_x"), NOW - 100, None, None, id="0123456789abcdef",
                      agent_id="claude.0123456789abcdef")
    return replace(base, **kw)


def test_a_credential_is_a_session_of_its_grant_and_its_token() -> None:
    c = _cred(tags=("travel",), deny_tags=("health",), write=False, expires=NOW + 60)
    s = session_for(c)
    assert (s.session_id, s.agent_id, s.agent_name, s.kind, s.status) == (
        "sess_saihm_0123456789abcdef", "claude.0123456789abcdef", "claude", KIND, "active")
    assert s.granted_scopes == Scopes(Scope(tags=("travel",), deny_tags=("health",)), Scope())
    assert s.expires_at == NOW + 60 and s.token_hash == token_hash("om_agent_x") == token_hash_of(c)
    cl = claims_of(c, AUD)
    assert cl.session_id == s.session_id and cl.scopes == s.granted_scopes and cl.audience == AUD
    # no expiry given: a session still ends, a century on
    assert session_for(_cred()).expires_at >= NOW + 99 * 365 * 86400


def test_reconcile_creates_updates_ends_and_never_revives_a_revoked_session() -> None:
    a, b = _cred(), _cred(name="b", id="fedcba9876543210", agent_id="b.fedcba9876543210",
                          digest=token_digest("om_agent_b"))
    first = reconcile([a, b], [])
    assert [s.session_id for s in first.put] == [a.session_id, b.session_id] and first.end == ()
    live = list(first.put)
    assert reconcile([a, b], live) == type(first)((), ())
    narrowed = replace(a, deny_tags=("health",))
    r = reconcile([narrowed, b], live)
    assert [s.granted_scopes.read.deny_tags for s in r.put if s.granted_scopes] == [("health",)] and r.end == ()
    # b revoked in the file: its session ends; a revoked from another device: not granted again
    revoked_a = replace(live[0], status="revoked")
    r = reconcile([a], [revoked_a, live[1]])
    assert r.put == () and [s.session_id for s in r.end] == [b.session_id]
    # a UOMP session of another kind is never touched
    uomp = replace(live[1], session_id="sess_other", kind="uomp")
    assert reconcile([a], [live[0], uomp]) == type(first)((), ())


def test_an_older_credentials_file_reads_as_migrated_and_narrowing_only_narrows(tmp_path: Path) -> None:
    digest = token_digest("om_agent_old")
    (tmp_path / FILENAME).write_text(json.dumps({"version": 1, "credentials": [
        {"name": "claude", "sha256": digest.hex(), "created": 5, "expires": None, "last_used": None}]}))
    f = CredentialFile(tmp_path)
    [c] = f.all()
    assert c.migrated and c.agent == "claude" and c.tags == ("*",) and c.write and len(c.id) == 16
    assert f.all()[0].id == CredentialFile(tmp_path).all()[0].id        # stable: derived from its hash
    # narrowing and issuing seal the entry again: they need the vault's key (the person's
    # passphrase); the service's one migration adopts the older entry first
    keyed = CredentialFile(tmp_path, bytes(range(32)))
    assert keyed.migrate() == ("claude",)
    assert keyed.all()[0].id == c.id
    n = keyed.narrow("claude", deny_tags=["health"], no_write=True)
    assert (n.deny_tags, n.write, n.migrated, n.tags, n.agent, n.id) == (("health",), False, False, ("*",), "claude",
                                                                         c.id)
    assert keyed.narrow("claude", deny_tags=["work"]).write is False      # never widened back
    assert f.all()[0].deny_tags == ("health", "work")
    with pytest.raises(NotFound):
        keyed.narrow("nobody", deny_tags=["x"])
    # a new credential: its own id and agent id, never the old name's
    issued = keyed.issue("claude2", NOW, tags=["travel"], deny_tags=["health"])
    assert issued.credential.agent == f"claude2.{issued.credential.id}" and issued.credential.tags == ("travel",)
    with pytest.raises(MalformedInput):
        keyed.issue("nothing", NOW, tags=[])
    # a tampered grant field is a damaged file, not a wider grant
    doc = json.loads((tmp_path / FILENAME).read_text())
    doc["credentials"][1]["grant"]["tags"] = "everything"
    (tmp_path / FILENAME).write_text(json.dumps(doc))
    from ownmem.errors import VaultError
    with pytest.raises(VaultError):
        CredentialFile(tmp_path).all()
