"""Agent credentials: bearer tokens for the SAIHM HTTPS binding of `ownmem agent`
(SAIHM "Authentication", "Credential handling": scoped to one holder, with an expiry, revocable).

    issue:   secret = 32 random bytes;  token = "om_agent_" + base64url(secret)
             the person is shown "Bearer <token>" once; the file keeps SHA-256(token) only
    check:   SHA-256(presented token) against every live entry, constant-time; an expired or
             revoked credential fails exactly as an unknown one (one "unauthenticated")

    seal:    each entry carries mac = HMAC-SHA256(K, "ownmem-agent-credential-v1" LF canonical JSON
             of the entry without "mac"), K = HKDF purpose key "ownmem/v1/agent-credentials" of
             the master secret: only a process holding the unlocked vault (the person's CLI
             with the passphrase, the running service) can add an entry the service accepts
    migrate: entries written before the seal existed are adopted once, at the first start of
             the service after the upgrade (sealed, marked "migrated"); then a sealed marker file
             says so, and an entry without a valid mac is refused and logged

The file (``agent-credentials.json`` in the vault folder, mode 0600) is rewritten whole by an
atomic rename under an exclusive lock, so the CLI and a running service never lose each
other's writes; the service re-reads it when it changes, so a revocation takes effect on the
next request, without a restart.  A credential names an agent: its name is the ``agent_id`` of
the memories it writes and picks the author key (HKDF info ``ownmem/v1/agent/<name>``).
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ownmem.errors import MalformedInput, NotFound, VaultError
from ownmem.purposes import Purpose
from ownmem.uomp.agents import valid_agent_id  # the one agent-id rule (credentials name agents by it)

FILENAME = "agent-credentials.json"
MARKER = "agent-credentials.migrated"      # sealed: the one migration has been done
CREDENTIALS_INFO = Purpose.AGENT_CREDENTIALS
_MAC_LABEL = b"ownmem-agent-credential-v1\n"
_MARKER_LABEL = b"ownmem-agent-credentials-migrated-v1"
_log = logging.getLogger("ownmem.agent")
PREFIX = "om_agent_"
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
LAST_USED_EVERY = 60      # seconds: a credential's "last used" is written at most this often
MAX_HEADER = 512
SESSION_PREFIX = "sess_saihm_"   # + the credential id: its UOMP session
LOCAL, REMOTE = "local", "remote"   # Credential.kind
MAX_CLIENT_ID = 512                 # characters of an OAuth client id (a CIMD URL)
ANY_TAG = "*"                 # guard.ANY_TAG: every tag, and memories with none
MAX_SCOPE = 1000              # entries of one scope list (sessions.MAX_NAMES)
MAX_SCOPE_NAME = 256          # characters of one tag or key (sessions.MAX_NAME)


@dataclass(frozen=True, slots=True)
class Credential:
    name: str
    digest: bytes            # SHA-256 of the token; the token itself is never stored
    created: int
    expires: int | None      # UNIX seconds; None: no expiry
    last_used: int | None
    # the grant (issue 19): defaults are what an entry of an older file effectively had
    id: str = ""                         # unique; "" only for one built in memory (tests)
    agent_id: str = ""                   # "" reads as the name (an entry of an older file)
    tags: tuple[str, ...] = (ANY_TAG,)
    keys: tuple[str, ...] = ()
    deny_tags: tuple[str, ...] = ()
    deny_keys: tuple[str, ...] = ()
    write: bool = True                   # may stage writes, forget, share
    kind: str = LOCAL                    # LOCAL: a bearer credential (`agent credential`, `agent connect`);
                                         # REMOTE: an OAuth grant the person consented to (agent/oauth.py),
                                         # whose digest is of a secret never shown: it has no bearer token
    client_id: str = ""                  # REMOTE: the OAuth client id (a CIMD URL or a registered id)
    migrated: bool = False               # from an older file (no id) or adopted unsealed at the one migration:
                                         # its grant was never chosen by the person
    mac: bytes | None = None             # the seal (entry_mac); None: written before seals, or forged

    def live(self, now: int) -> bool:
        return self.expires is None or now < self.expires

    @property
    def session_id(self) -> str:
        return SESSION_PREFIX + self.id if self.id else ""

    @property
    def agent(self) -> str:
        """The agent id of what it writes (its author key's name)."""
        return self.agent_id or self.name

    def grant_text(self) -> str:
        """The grant in one line, as the person is shown it."""
        tags = ", ".join("every tag and untagged memory (*)" if t == ANY_TAG else t for t in self.tags) or "-"
        out = f"reads {tags}"
        if self.keys:
            out += f"; keys {', '.join(self.keys)}"
        if self.deny_tags or self.deny_keys:
            out += f"; denied {', '.join(self.deny_tags + self.deny_keys)}"
        out += "; high-sensitivity items never (only by exact key, which SAIHM has not)"
        return out + ("; writes staged for your confirmation" if self.write else "; no writes")


@dataclass(frozen=True, slots=True)
class Issued:
    credential: Credential
    header: str              # the Authorization value, shown once: "Bearer om_agent_..."


def valid_name(name: str) -> bool:
    return bool(NAME.fullmatch(name))


def legacy_id(digest: bytes) -> str:
    """The id of an entry of an older file: stable (from its token's hash), never the hash itself."""
    return hashlib.sha256(b"ownmem/v1/agent-credential-id|" + digest).hexdigest()[:16]


def scope_list(v: object, what: str) -> tuple[str, ...]:
    """A scope list as given (CLI or file): strings of 1 to MAX_SCOPE_NAME printable characters."""
    if v is None:
        return ()
    if not isinstance(v, (list, tuple)) or len(v) > MAX_SCOPE or not all(
            isinstance(x, str) and 0 < len(x) <= MAX_SCOPE_NAME and x.isprintable() for x in v):
        raise MalformedInput(f"{what}: at most {MAX_SCOPE} names of 1 to {MAX_SCOPE_NAME} printable characters")
    return tuple(dict.fromkeys(v))


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def authenticate(creds: tuple[Credential, ...], authorization: str | None, now: int) -> Credential | None:
    """The live credential an Authorization header presents, or None (one answer for every cause).

    Every entry is compared, in constant time per entry, so how long this takes does not say
    which entry, if any, came close."""
    if authorization is None or len(authorization) > MAX_HEADER or not authorization.startswith("Bearer "):
        return None
    digest = token_digest(authorization[7:].strip())
    found = None
    for c in creds:
        if hmac.compare_digest(c.digest, digest) and c.live(now):
            found = c
    return found


def _entry(c: Credential) -> dict[str, object]:
    d: dict[str, object] = {
        "name": c.name, "sha256": c.digest.hex(), "created": c.created, "expires": c.expires,
        "last_used": c.last_used, "id": c.id, "agent_id": c.agent, "migrated": c.migrated,
        "grant": {"tags": list(c.tags), "keys": list(c.keys), "deny_tags": list(c.deny_tags),
                  "deny_keys": list(c.deny_keys), "write": c.write}}
    if c.kind != LOCAL:
        # only on remote grants: an entry sealed before kinds existed keeps its seal
        d["kind"], d["client_id"] = c.kind, c.client_id
    if c.mac is not None:
        d["mac"] = c.mac.hex()
    return d


def entry_mac(key: bytes, c: Credential) -> bytes:
    """The seal of an entry: over its canonical JSON without "mac", so every other field (and
    any an entry gains later) is covered without naming it here."""
    doc = {k: v for k, v in _entry(c).items() if k != "mac"}
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hmac.new(key, _MAC_LABEL + canonical, hashlib.sha256).digest()


def sealed(key: bytes, c: Credential) -> bool:
    return c.mac is not None and hmac.compare_digest(c.mac, entry_mac(key, c))


def seal(key: bytes, c: Credential) -> Credential:
    return replace(c, mac=entry_mac(key, replace(c, mac=None)))


def _marker_mac(key: bytes) -> bytes:
    return hmac.new(key, _MARKER_LABEL, hashlib.sha256).digest()


def _encode(creds: tuple[Credential, ...]) -> bytes:
    return json.dumps({"version": 1, "credentials": [_entry(c) for c in creds]}, indent=1).encode()


def _credential(e: dict[str, object], name: str, digest: bytes, created: int, expires: int | None,
                last: int | None) -> Credential:
    """An entry with its grant; one without an id is an entry of an older file (migrated)."""
    if "id" not in e:
        return Credential(name, digest, created, expires, last, id=legacy_id(digest), agent_id=name, migrated=True)
    g, ident, agent, migrated = e["grant"], e["id"], e["agent_id"], e.get("migrated", False)
    kind, client = e.get("kind", LOCAL), e.get("client_id", "")
    if kind not in (LOCAL, REMOTE) or not isinstance(client, str) or len(client) > MAX_CLIENT_ID \
            or (kind == REMOTE) != bool(client) or not client.isprintable():
        raise ValueError
    if (not isinstance(g, dict) or not isinstance(ident, str) or not re.fullmatch(r"[0-9a-f]{16}", ident)
            or not isinstance(agent, str) or not valid_agent_id(agent) or not isinstance(migrated, bool)
            or not isinstance(g.get("write"), bool)):
        raise ValueError
    try:
        return Credential(name, digest, created, expires, last, id=ident, agent_id=agent,
                          tags=scope_list(g.get("tags"), "tags"), keys=scope_list(g.get("keys"), "keys"),
                          deny_tags=scope_list(g.get("deny_tags"), "deny_tags"),
                          deny_keys=scope_list(g.get("deny_keys"), "deny_keys"), write=g["write"], migrated=migrated,
                          kind=kind, client_id=client)
    except MalformedInput:
        raise ValueError from None


def _decode(raw: bytes) -> tuple[Credential, ...]:
    try:
        doc = json.loads(raw)
        out = []
        for e in doc["credentials"]:
            name, digest = e["name"], bytes.fromhex(e["sha256"])
            created, expires, last = e["created"], e["expires"], e["last_used"]
            mac, migrated = e.get("mac"), e.get("migrated", False)
            if (not isinstance(name, str) or not valid_name(name) or len(digest) != 32 or type(created) is not int
                    or not (expires is None or type(expires) is int) or not (last is None or type(last) is int)
                    or not (mac is None or isinstance(mac, str)) or type(migrated) is not bool):
                raise ValueError
            cred = _credential(e, name, digest, created, expires, last)
            out.append(replace(cred, mac=bytes.fromhex(mac) if mac else None, migrated=cred.migrated or migrated))
        if len({c.id for c in out}) != len(out):
            raise ValueError
        return tuple(out)
    except (ValueError, KeyError, TypeError):
        raise VaultError(f"the agent credentials file is damaged ({FILENAME}); "
                         "remove it to revoke every credential") from None


class CredentialFile:
    """The credentials of one vault folder.  With ``key`` (CREDENTIALS_INFO of the unlocked
    vault: the service, the person's CLI) it issues, and ``all()`` is the sealed entries only;
    without, it lists (``all()``: every entry as written) and revokes, which need no proof."""

    def __init__(self, folder: str | Path, key: bytes | None = None) -> None:
        self.path = Path(folder) / FILENAME
        self._lock_path = Path(folder) / (FILENAME + ".lock")
        self._marker = Path(folder) / MARKER
        self._key = key
        self._cache: tuple[tuple[int, int, int] | None, tuple[Credential, ...]] = (None, ())
        self._mutex = threading.Lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)      # releases the lock

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _read(self) -> tuple[Credential, ...]:
        try:
            return _decode(self.path.read_bytes())
        except FileNotFoundError:
            return ()

    def _write(self, creds: tuple[Credential, ...]) -> None:
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, _encode(creds))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def all(self) -> tuple[Credential, ...]:
        """The credentials as the file holds them now (re-read only when the file changed); with
        a key, only those whose seal verifies (each other one logged once per change of the file:
        written by something that did not hold the key, it is refused)."""
        with self._mutex:
            stamp = self._stamp()
            if stamp != self._cache[0]:
                creds = self._read()
                if self._key is not None:
                    key = self._key
                    for c in creds:
                        if not sealed(key, c):
                            _log.warning("agent credential %r refused: its entry is not sealed with the "
                                         "vault's key (written without the person's passphrase)", c.name)
                    creds = tuple(c for c in creds if sealed(key, c))
                self._cache = (stamp, creds)
            return self._cache[1]

    def _needs_key(self, what: str) -> bytes:
        if self._key is None:
            raise VaultError(f"{what} needs the person's passphrase (the vault unlocked)")
        return self._key

    def migrate(self) -> tuple[str, ...]:
        """Once, at the first start of the service after the upgrade to sealed entries: seal
        every unsealed entry, marked migrated, and write the sealed marker -> the names adopted.
        Never again once the marker verifies, nor when the file already holds a sealed entry
        (it was written after the upgrade: a missing marker was removed, not never written)."""
        key = self._needs_key("the migration of agent credentials")
        with self._locked():
            try:
                done = hmac.compare_digest(bytes.fromhex(self._marker.read_text().strip()), _marker_mac(key))
            except (FileNotFoundError, ValueError):
                done = False
            creds = self._read()
            adopted: tuple[str, ...] = ()
            if not done and not any(sealed(key, c) for c in creds):
                adopted = tuple(c.name for c in creds)
                if creds:
                    self._write(tuple(seal(key, replace(c, migrated=True)) for c in creds))
            if not done:
                fd = os.open(self._marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.write(fd, _marker_mac(key).hex().encode() + b"\n")
                    os.fsync(fd)
                finally:
                    os.close(fd)
        return adopted

    def issue(self, name: str, now: int, *, expires_days: float | None = None,
              tags: tuple[str, ...] | list[str] | None = None, keys: tuple[str, ...] | list[str] = (),
              deny_tags: tuple[str, ...] | list[str] = (), deny_keys: tuple[str, ...] | list[str] = (),
              write: bool = True, kind: str = LOCAL, client_id: str = "") -> Issued:
        """A new credential with its grant (``tags`` None: ``*``, every tag and untagged memory).
        A REMOTE one (an OAuth grant, ``client_id`` its client) has no bearer token: ``header`` is ""."""
        if kind not in (LOCAL, REMOTE) or (kind == REMOTE) != bool(client_id) or len(client_id) > MAX_CLIENT_ID \
                or not client_id.isprintable():
            raise MalformedInput("a remote grant names its OAuth client id (and only a remote grant does)")
        if not valid_name(name):
            raise MalformedInput("a credential name is 1-64 of a-z 0-9 . _ - and starts with a letter or digit")
        if expires_days is not None and not 0 < expires_days <= 36500:
            raise MalformedInput("--expires is a number of days between 0 and 36500")
        key = self._needs_key("issuing an agent credential")
        read_tags = scope_list([ANY_TAG] if tags is None else list(tags), "--grant")
        read_keys = scope_list(list(keys), "--key")
        denied_tags, denied_keys = scope_list(list(deny_tags), "--deny"), scope_list(list(deny_keys), "--deny-key")
        if not read_tags and not read_keys:
            raise MalformedInput("a credential that may read nothing: give --grant TAG or --key KEY")
        token = PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        digest = token_digest(token)
        with self._locked():
            creds = self._read()
            if any(c.name == name for c in creds):
                raise VaultError(f"a credential named {name!r} exists (revoke it first)")
            ident = secrets.token_hex(8)
            while any(c.id == ident for c in creds):
                ident = secrets.token_hex(8)
            expires = None if expires_days is None else now + int(expires_days * 86400)
            cred = seal(key, Credential(name, digest, now, expires, None, id=ident, agent_id=f"{name}.{ident}",
                                        tags=read_tags, keys=read_keys,
                                        deny_tags=denied_tags, deny_keys=denied_keys, write=write,
                                        kind=kind, client_id=client_id))
            self._write(creds + (cred,))
        return Issued(cred, f"Bearer {token}" if kind == LOCAL else "")

    def narrow(self, name: str, *, deny_tags: tuple[str, ...] | list[str] = (),
               deny_keys: tuple[str, ...] | list[str] = (), no_write: bool = False) -> Credential:
        """Narrow a credential's grant (never widen it): more denied tags and keys, writes off.
        A migrated credential the person narrowed is theirs now (no longer listed as migrated)."""
        key = self._needs_key("narrowing an agent credential (its entry is sealed again)")
        more_tags, more_keys = scope_list(list(deny_tags), "--deny"), scope_list(list(deny_keys), "--deny-key")
        with self._locked():
            creds = self._read()
            found = [c for c in creds if c.name == name]
            if not found:
                raise NotFound(f"no agent credential named {name!r}")
            c = found[0]
            new = seal(key, replace(c, deny_tags=tuple(dict.fromkeys(c.deny_tags + more_tags)),
                                    deny_keys=tuple(dict.fromkeys(c.deny_keys + more_keys)),
                                    write=c.write and not no_write, migrated=False, mac=None))
            if len(new.deny_tags) > MAX_SCOPE or len(new.deny_keys) > MAX_SCOPE:
                raise MalformedInput(f"at most {MAX_SCOPE} denied tags and keys")
            self._write(tuple(new if x.digest == c.digest else x for x in creds))
        return new

    def revoke(self, name: str) -> None:
        with self._locked():
            creds = self._read()
            if not any(c.name == name for c in creds):
                raise NotFound(f"no agent credential named {name!r}")
            self._write(tuple(c for c in creds if c.name != name))

    def touch(self, cred: Credential, now: int) -> None:
        """Record a use, at most once a LAST_USED_EVERY seconds (a write per request would be
        a disk write per recall); a credential revoked meanwhile stays revoked."""
        if (cred.last_used is not None and now - cred.last_used < LAST_USED_EVERY) or self._key is None:
            return
        key = self._key
        with self._locked():
            creds = self._read()
            if not any(c.digest == cred.digest and sealed(key, c) for c in creds):
                return
            # sealed again with the new time; an entry that was not sealed stays as it was (refused)
            self._write(tuple(seal(key, replace(c, last_used=now)) if c.digest == cred.digest and sealed(key, c)
                              else c for c in creds))
