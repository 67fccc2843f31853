"""`ownmem agent` UOMP session commands (UOMP draft-00 "Local Profile": "Token Delivery";
"Auth Service API"; "Audit and Logging").

    ownmem agent authorize uom.json [--grant TAG...] [--deny TAG...] [--minutes N] [--yes]
        create + grant a session on the running service; prints the session id and token; the
        panel shows the publisher's status ("unverified publisher", 16.4), and in enterprise mode
        an agent no required method verifies is refused before anything is asked
    ownmem agent run [authorize options] [--env NAME]... --manifest uom.json -- CMD...
        CMD runs with UOM_TOKEN, UOMP_BASE_URL and only the allow-list of the environment
        (CHILD_ENV, LC_*, --env names; never OWNMEM_*/SAIHM_*); the session is revoked when CMD exits
    ownmem agent sessions [--json]
        every session: name, kind in words, what it may read, last use (from the audit), expiry
    ownmem agent revoke SESSION
    ownmem agent audit [--session ID] [--json]
        on the agent's machine: its audit.db, through the service; on another device: the
        batches synced to the vault, each checked against its anchor in the public log
    ownmem agent audit prune [--as-of DATE] [--days N]   drop entries older than N days (90, the
        floor) before DATE (not after now), and forget the synced batches as old (through the
        service, else with the vault here); the deletion is itself an audit entry (retention.py)

Every command but another device's ``audit`` talks to the running `ownmem agent`.  Reading
and narrowing (sessions, revoke, audit) show it the admin secret of the vault folder
(uomp-admin, 0600); widening and deleting (authorize, run, audit prune) need the person's
proof: the passphrase (prompt, OWNMEM_PASSPHRASE, or with --keyring the OS keyring entry)
unlocks the vault here, and each request carries an approval made with its purpose key
(approval.py), which a process that only reads the vault folder's files cannot make.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from ownmem.agent.audit import AUDIT_INFO, DB_NAME as AUDIT_DB, read_on_disk
from ownmem.agent.audit_batches import audit_view, log_anchor_check, log_newer_anchors
from ownmem.agent.audit_sync import prune_batches
from ownmem.agent.retention import RETENTION_DAYS, prune_cutoff
from ownmem.agent.sessions import ADMIN_HEADER, AdminCredential
from ownmem.cli.common import folder as _folder, keyring_passphrase as _passphrase, unlock as _unlock, when as _when
from ownmem.errors import ServiceDown, SyncError, VaultError
from ownmem.scrub import forget_passphrase_env
from ownmem.termsafe import raw, visible
from ownmem.uomp.approval import APPROVAL_HEADER, APPROVAL_INFO, sign
from ownmem.uomp.manifest import AgentUnverified, Manifest, load_manifest, retention_level
from ownmem.uomp.publisher import PublisherStatus, gpg_signature_path, load_trust, verify_publisher
from ownmem.uomp.terms import UNVERIFIED, admission, identity_key
from ownmem.uomp.tokens import iso, parse_iso
from ownmem.uomp.usage import kind_words, last_use
from ownmem.usecases.sessions import revoke_session
from ownmem.vault import Vault
from ownmem.vault.sync import Syncer, syncer_for

DEFAULT_PORT = 9374


def _base(args: argparse.Namespace) -> str:
    return f"http://127.0.0.1:{args.port}"


def person_key(args: argparse.Namespace) -> bytes:
    """The approval key (approval.APPROVAL_INFO): the person's proof, from the vault unlocked
    with the passphrase (prompt or OWNMEM_PASSPHRASE) or, with --keyring, the OS keyring entry."""
    vault = Vault(_folder(args))
    if not vault.exists():
        raise VaultError(f"no vault at {vault.folder} (create one with `ownmem init`)")
    pw, _ = _passphrase(str(vault.folder), bool(getattr(args, "keyring", False)))
    v = vault.unlock(pw)
    del pw
    try:
        return v.purpose_key(APPROVAL_INFO)
    finally:
        v.close()


def _admin(args: argparse.Namespace, method: str, path: str, body: Any = None, *,
           approve: bytes | None = None) -> Any:
    """One request to the service: with the admin secret, and approved with ``approve`` (the
    person_key) when it widens or deletes."""
    cred = AdminCredential(Path(_folder(args)))
    if not cred.path.exists():
        raise VaultError("no UOMP admin credential in the vault folder: is `ownmem agent` running on this vault?")
    raw = json.dumps(body).encode() if body is not None else b""
    headers = {ADMIN_HEADER: cred.read(), "Content-Type": "application/json"}
    if approve is not None:
        headers[APPROVAL_HEADER] = sign(approve, _base(args), method, path, raw, int(time.time()))
    try:
        r = httpx.request(method, _base(args) + path, content=raw, headers=headers, timeout=30)
    except httpx.HTTPError as e:
        raise ServiceDown(f"`ownmem agent` does not answer on {_base(args)} ({type(e).__name__})") from None
    doc = r.json()
    if r.status_code >= 400:
        err = doc.get("error", {}) if isinstance(doc, dict) else {}
        raise VaultError(visible(f"{err.get('code', r.status_code)}: {err.get('message', '')}"))
    return doc


def _publisher(path: str | os.PathLike[str], m: Manifest, folder: Path) -> PublisherStatus:
    """16.3: the publisher of the manifest to authorize, verified against the vault's trust list;
    16.4: in enterprise mode one that no required method verifies is refused here, before the
    passphrase is asked (AgentUnverified; the service refuses it too)."""
    trust = load_trust(folder)
    status = verify_publisher(m, trust, gpg_signature=gpg_signature_path(Path(path)))
    refused = admission(status, trust)
    if refused is not None:
        raise AgentUnverified(refused)
    return status


def _authorize(args: argparse.Namespace) -> dict[str, Any]:
    m = load_manifest(args.manifest)          # schema-validated, one problem per line when refused
    status = _publisher(args.manifest, m, Path(_folder(args)))
    read = m.requested_scopes.read
    grant = args.grant if args.grant is not None else list(read.tags if read else ())
    deny = sorted(set((args.deny or []) + list(read.deny_tags if read else ())))
    keys = list(read.keys if read else ())
    policy = m.data_retention_policy
    if not args.yes:
        if not sys.stdin.isatty():
            raise VaultError("not a terminal: pass --yes to authorize without the panel")
        view = retention_level(policy, args.minutes * 60)
        print(visible(f"Agent {m.agent.name} ({m.agent.id} {m.agent.version}) asks to read:"))
        print(visible(f"  tags {', '.join(grant) or '-'}; keys {', '.join(keys) or '-'}; "
                      f"denied {', '.join(deny) or '-'}"))
        print(f"  for {args.minutes:g} minutes")
        # 16.4: "the authorization panel ... MUST prompt 'unverified publisher'"
        print(("" if status.verified else "\033[31m") + f"  publisher: {visible(status.summary())}"   # our colour: raw
              + ("" if status.verified else "\033[0m"), file=raw(sys.stdout))
        print(("\033[31m" if view.warning else "") + f"  retention: {visible(view.text)}"     # our colour: raw
              + ("\033[0m" if view.warning else ""), file=raw(sys.stdout))
        if input("Grant? [y/N] ").strip().lower() not in ("y", "yes"):
            raise VaultError("not authorized")
    elif not status.verified:
        print(f"warning: {UNVERIFIED} ({visible(m.agent.id)})", file=sys.stderr)    # --yes: no panel to show it
    key = person_key(args)        # after the panel: the passphrase is the person's yes
    created = _admin(args, "POST", "/v1/sessions", approve=key, body={
        "agent_id": m.agent.id, "agent_name": m.agent.name,
        "requested_scopes": {"read": {"tags": list(read.tags), "keys": list(read.keys)}} if read else {},
        "duration_minutes": args.minutes,
        "proof_required": bool(policy.proof_required) if policy else False,
        "deletion_method": policy.deletion_method if policy else None,
        "identity_key": identity_key(m)})
    sid = created["session_id"]
    grant_doc: dict[str, Any] = {
        "granted_scopes": {"read": {"tags": grant, "keys": keys, "deny_tags": deny,
                                    "deny_keys": list(read.deny_keys if read else ())}},
        "aggregation_only": args.aggregation_only, "task_bound": args.task_bound}
    if read is not None and read.allowed_fields is not None:
        grant_doc["allowed_fields"] = [str(f) for f in read.allowed_fields]
    granted = _admin(args, "POST", f"/v1/sessions/{sid}/grant", grant_doc, approve=key)
    return {"session_id": sid, "token": granted["token"], "expires_at": granted["expires_at"]}


def cmd_authorize(args: argparse.Namespace) -> int:
    out = _authorize(args)
    print(json.dumps(out, indent=2))
    return 0


# what the child of `ownmem agent run` inherits: what a program needs to run, nothing that names
# or opens the vault (OWNMEM_PASSPHRASE would make the agent the person; OWNMEM_VAULT points it at
# the admin file and the credentials)
CHILD_ENV = ("PATH", "HOME", "LANG", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL")
_NEVER = ("OWNMEM_", "SAIHM_", "UOM_TOKEN", "UOMP_")


def _env_name(s: str) -> str:
    if not s or s.startswith(_NEVER) or "=" in s or "\0" in s:
        raise argparse.ArgumentTypeError(f"{s!r} cannot be passed to the agent (never OWNMEM_*, SAIHM_*, UOMP_*)")
    return s


def child_env(parent: dict[str, str], extra: list[str], token: str, base_url: str) -> dict[str, str]:
    """The environment of the agent `ownmem agent run` starts: the allow-list (CHILD_ENV, LC_*)
    and the names the person added with --env, taken from ``parent`` where set, then the token
    and the base URL.  Never an OWNMEM_* or SAIHM_* variable, whatever --env says."""
    names = set(CHILD_ENV) | set(extra)
    env = {k: v for k, v in parent.items() if (k in names or k.startswith("LC_")) and not k.startswith(_NEVER)}
    env.update(UOM_TOKEN=token, UOMP_BASE_URL=base_url)
    return env


def cmd_run(args: argparse.Namespace) -> int:
    cmd = [c for c in args.cmd if c != "--"] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        raise VaultError("no command to run (ownmem agent run --manifest uom.json -- CMD ...)")
    out = _authorize(args)
    # the child must not find the passphrase in /proc/<this process>/environ either (scrub.py);
    # nothing after the grant needs it (the revocation takes the admin file)
    if not forget_passphrase_env():
        print("warning: OWNMEM_PASSPHRASE could not be wiped from this process's /proc environ: the agent "
              "may read it there (prefer the prompt or --keyring)", file=sys.stderr)
    env = child_env(dict(os.environ), args.env or [], out["token"], _base(args))
    try:
        rc = subprocess.call(cmd, env=env)
    finally:
        _admin(args, "POST", f"/v1/sessions/{out['session_id']}/revoke")
        print(f"session {out['session_id']} revoked", file=sys.stderr)
    return rc


def _scope_text(g: dict[str, Any]) -> str:
    """A session's grant in words: what it may read, what never, and whether it may write."""
    read, write = g.get("read") or {}, g.get("write") or {}
    tags = ["every tag and untagged memory" if t == "*" else t for t in read.get("tags") or []]
    may = "; ".join(x for x in (f"tags {', '.join(tags)}" if tags else "",
                                f"keys {', '.join(read.get('keys') or [])}" if read.get("keys") else "") if x)
    never = [*(read.get("deny_tags") or []), *(read.get("deny_keys") or [])]
    text = f"reads {may or 'nothing'}" + (f"; never {', '.join(never)}" if never else "")
    writes = write.get("tags") or write.get("keys")
    return text + ("; read-write (its writes wait for you)" if writes else "; read-only")


def cmd_sessions(args: argparse.Namespace) -> int:
    ss = _admin(args, "GET", "/v1/sessions")["sessions"]
    # last use: the newest audit entry of the agent's own acts (usage.last_use), by session
    entries = _admin(args, "GET", "/v1/audit")["entries"]
    used = last_use((str(e.get("session_id") or ""), str(e.get("action")), parse_iso(e.get("timestamp")))
                    for e in entries)
    if args.json:
        print(json.dumps([{**s, "kind_words": kind_words(s.get("kind")),
                           "last_used": iso(used[s["session_id"]]) if s["session_id"] in used else None}
                          for s in ss], indent=2))
        return 0
    if not ss:
        print("no sessions (connect an assistant with `ownmem agent connect NAME`)")
    for s in ss:
        # every kind in one list: an MCP host on this machine, a remote one (OAuth), a UOMP agent
        g = s.get("granted_scopes") or s.get("requested_scopes") or {}
        sid = s["session_id"]
        last = _when(used[sid]) if sid in used else "never used"
        # a credential without an end set has one a century on (guarded.NO_EXPIRY)
        ends = parse_iso(s["expires_at"])
        expiry = "no end set" if ends - time.time() > 50 * 365 * 86400 else _when(ends)
        print(visible(f"{s.get('agent_name') or s['agent_id']}  [{kind_words(s.get('kind'))}]  {s['status']}"))
        print(visible(f"  {_scope_text(g)}"))
        print(visible(f"  last used {last}; expires {expiry}; session {sid}"))
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    if AdminCredential(Path(_folder(args))).path.exists() and not args.via_server:
        _admin(args, "POST", f"/v1/sessions/{args.session}/revoke")
        print(f"revoked {args.session}")
        return 0
    # another device: an owner-signed revocation record, carried by the sync server
    v = _unlock(args)
    try:
        revoke_session(v, args.session)
        syncer_for(v).sync_once()
    finally:
        v.close()
    print(f"revocation of {args.session} sent through the sync server")
    return 0


def _synced_audit(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Another device (no agent service here): the batches synced to this vault, each checked
    against its anchor in the public log (ownmem.agent.audit_sync); problems go to stderr."""
    v = _unlock(args)
    try:
        check, newer = None, None
        if Syncer.linked(v.store) is not None:
            s = syncer_for(v)
            try:
                s.sync_once()
                check, newer = log_anchor_check(s), log_newer_anchors(s)
            except SyncError as e:
                print(f"not synced ({e}): the audit as this device last received it", file=sys.stderr)
        view = audit_view(v.open_all().entries, holder_id=v.holder().holder_id, anchor_check=check,
                          newer_anchors=newer, session=args.session)
    finally:
        v.close()
    for w in view.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return view.entries


def cmd_audit(args: argparse.Namespace) -> int:
    q = f"?session_id={args.session}" if args.session else ""
    local = AdminCredential(Path(_folder(args))).path.exists() and (Path(_folder(args)) / AUDIT_DB).exists()
    if not local:
        entries = _synced_audit(args)
    else:
        try:
            entries = _admin(args, "GET", "/v1/audit" + q)["entries"]
        except ServiceDown as down:
            entries = _audit_on_disk(args)
            print(f"{down}: the audit as this machine's disk holds it", file=sys.stderr)
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for e in entries:
        # an agent write's attempt is no verdict: its outcome follows (staging.WriteAudit)
        verdict = "attempt" if e["action"] == "write_attempt" else "allowed" if e["allowed"] else "DENIED "
        # one entry, one row: a key with %0A or ESC in it (a stranger's path) is shown, never obeyed
        print(visible(f"{e['timestamp']} {e['session_id']} {e['agent_id']} {e['action']:<10} {verdict} "
                      f"{e.get('key') or e.get('tag') or '-'}: {e['reason']}"))
    return 0


def _audit_on_disk(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The agent's machine with its service down (stopped, or killed before it ingested its
    journal): the log read from disk, journal included, opened for reading only (a service that
    runs after all, on another port, keeps writing it undisturbed)."""
    v = _unlock(args)
    try:
        key = v.purpose_key(AUDIT_INFO)
    finally:
        v.close()
    return [e.to_json() for e in read_on_disk(Path(_folder(args)), key, args.session)]


def _date(s: str) -> int:
    try:
        d = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date: {s!r}") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return int(d.timestamp())


def _days(s: str) -> float:
    try:
        d = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {s!r}") from None
    return d             # its range is retention.prune_cutoff's decision


def cmd_prune(args: argparse.Namespace) -> int:
    # the one retention decision (retention.py), by the real clock, first: a future --as-of or a
    # retention under the floor is refused before the passphrase is asked (and again by the service
    # for a raw request); then the person's proof: the service refuses a prune without it
    before = prune_cutoff(int(time.time()), as_of=args.as_of, days=args.days)
    pruned, forgot = _prune(args, before)
    print(f"pruned {pruned} audit entries older than {args.days:g} days")
    print(f"forgot {forgot} synced audit batches older than {args.days:g} days")
    return 0


def _prune(args: argparse.Namespace, before: int) -> tuple[int, int]:
    """The entry points of an audit deletion, each recording the deletion's own entry first: on the
    agent's machine the running service, approved with the person's proof (audit.db and the
    batches; refused when it does not answer: this process must not write under it); on a device
    without the service, the vault here, unlocked with the passphrase (the batches only)."""
    if AdminCredential(Path(_folder(args))).path.exists():
        approve = person_key(args)
        try:
            got = _admin(args, "POST", "/v1/audit/prune", {"before": before}, approve=approve)
        except ServiceDown as e:
            raise ServiceDown(f"{e}: nothing pruned (start it, or give its --port)") from None
        return int(got["pruned"]), int(got["forgotten"])
    v = _unlock(args)
    try:
        return 0, prune_batches(v, syncer_for(v) if Syncer.linked(v.store) is not None else None, before)
    finally:
        v.close()


def _auth_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grant", nargs="*", metavar="TAG", help="tags to grant (default: the manifest's)")
    p.add_argument("--deny", nargs="*", metavar="TAG", help="tags to deny")
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--yes", action="store_true", help="grant without the interactive panel")
    p.add_argument("--aggregation-only", action="store_true")
    p.add_argument("--task-bound", action="store_true")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    _keyring_option(p)


def _keyring_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keyring", action="store_true",
                   help="take the passphrase (the person's proof) from the OS keyring entry `ownmem agent "
                        "--keyring` keeps")


def register(asub: Any) -> None:
    au = asub.add_parser("authorize",
                         help="create and grant a UOMP session for an agent's uom.json; asks the passphrase")
    au.add_argument("manifest")
    _auth_options(au)
    au.set_defaults(fn=cmd_authorize)
    rn = asub.add_parser("run", help="run CMD with UOM_TOKEN and UOMP_BASE_URL; revoke when it exits; "
                                     "asks the passphrase")
    rn.add_argument("--manifest", required=True)
    _auth_options(rn)
    rn.add_argument("--env", action="append", type=_env_name, metavar="NAME",
                    help="pass this environment variable to CMD too (besides PATH, HOME, LANG, LC_*, TERM, TZ, "
                         "TMPDIR, USER, LOGNAME, SHELL; never OWNMEM_* nor SAIHM_*)")
    rn.add_argument("cmd", nargs=argparse.REMAINDER)
    rn.set_defaults(fn=cmd_run)
    ss = asub.add_parser("sessions", help="list every agent session: assistants on this computer (MCP), remote "
                                          "assistants (MCP over the internet), UOMP agents; with last use")
    ss.add_argument("--json", action="store_true")
    ss.add_argument("--port", type=int, default=DEFAULT_PORT)
    ss.set_defaults(fn=cmd_sessions)
    rv = asub.add_parser("revoke", help="revoke a UOMP session now")
    rv.add_argument("session")
    rv.add_argument("--via-server", action="store_true",
                    help="send an owner-signed revocation through the sync server (the default on a device "
                         "without the agent's admin credential)")
    rv.add_argument("--port", type=int, default=DEFAULT_PORT)
    rv.set_defaults(fn=cmd_revoke)
    ad = asub.add_parser("audit", help="the UOMP audit log")
    ad.add_argument("--session")
    ad.add_argument("--json", action="store_true")
    ad.add_argument("--port", type=int, default=DEFAULT_PORT)
    ad.set_defaults(fn=cmd_audit)
    asub_a = ad.add_subparsers(dest="audit_cmd", metavar="ACTION")
    pr = asub_a.add_parser("prune", help=f"drop audit entries older than the retention ({RETENTION_DAYS} days "
                                         "or more); asks the passphrase")
    pr.add_argument("--as-of", type=_date, metavar="DATE", help="judge the age as of DATE (not after now)")
    pr.add_argument("--port", type=int, default=DEFAULT_PORT)
    _keyring_option(pr)
    pr.add_argument("--days", type=_days, default=RETENTION_DAYS, metavar="N",
                    help=f"the retention in days (section 18.3: configurable, default and floor {RETENTION_DAYS})")
    pr.set_defaults(fn=cmd_prune)
