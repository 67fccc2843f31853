"""`ownmem agent` and its subcommands (registered into the main parser by ``register``).

    ownmem agent [--port 9374] [--host 127.0.0.1] [--keyring]    run the service
    ownmem agent credential issue --name NAME [GRANT] [--keyring]   print a credential, once
    ownmem agent credential revoke NAME
    ownmem agent credential list [--json]
    ownmem agent credential narrow NAME [--deny TAG ...] [--deny-key KEY ...] [--no-write] [--keyring]
    ownmem agent connect NAME [GRANT] [--minutes N] [--port 9374] [--keyring]
        issue + the MCP host snippet; on a terminal without --grant/--key/--deny it lists the
        vault's tags with their counts and asks which it may read (Enter: all) and whether it
        may write (its writes wait for the person)

    GRANT: [--grant TAG ...] [--key KEY ...] [--deny TAG ...] [--deny-key KEY ...] [--no-write]
           [--expires DAYS]; without --grant/--key: every tag and untagged memory ("*").
           High-sensitivity items are never recalled whatever the grant (only an exact-key
           read reaches them, which the SAIHM binding has not); the grant is printed.

Each credential is a UOMP session of the running service (agent/guarded.py), listed by
`ownmem agent sessions` and on the person's other devices, revocable from any of them.
Issuing and narrowing need the person's passphrase: each entry of the credentials file is
sealed with a key of the unlocked vault (credentials.py), and the service refuses an entry that
is not, so a process that can only write the vault folder's files mints nothing.  Revoking and
listing need no passphrase (the file holds only hashes; revoking narrows).  The service needs
the vault unlocked; ``--keyring`` takes the passphrase from the OS keyring (the ``keyring``
package) and, after a first successful unlock with the passphrase, keeps it there.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ownmem.agent.credentials import CREDENTIALS_INFO, SESSION_PREFIX, CredentialFile
from ownmem.agent.port import DEFAULT_HOST, DEFAULT_PORT, PATH, PortFile
from ownmem.agent.quota import Limits, parse_size
from ownmem.agent.sessions import DB_NAME
from ownmem.cli import manifest as manifest_cli
from ownmem.cli.common import folder as _folder, keyring_passphrase as _passphrase, when as _when
from ownmem.cli.sessions import register as register_uomp
from ownmem.errors import VaultError
from ownmem.termsafe import visible
from ownmem.uomp.control import is_control
from ownmem.uomp.usage import parse_mode_answer, parse_tags_answer, tag_counts
from ownmem.vault import Vault


def _credentials(args: argparse.Namespace, *, sealing: bool = False) -> CredentialFile:
    """The vault folder's credentials; ``sealing``: with the key only the passphrase gives (or
    the OS keyring entry, with --keyring), to issue."""
    vault = Vault(_folder(args))
    if not vault.exists():
        raise VaultError(f"no vault at {vault.folder} (create one with `ownmem init`)")
    if not sealing:
        return CredentialFile(vault.folder)
    pw, _ = _passphrase(str(vault.folder), bool(getattr(args, "keyring", False)))
    v = vault.unlock(pw)
    del pw
    try:
        return CredentialFile(vault.folder, v.purpose_key(CREDENTIALS_INFO))
    finally:
        v.close()


def _days(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {s!r}") from None


def _issue(args: argparse.Namespace) -> Any:
    tags = args.grant if args.grant is not None else (None if args.key is None else [])
    return _credentials(args, sealing=True).issue(
        args.name, int(time.time()), expires_days=args.expires, tags=tags, keys=args.key or [],
        deny_tags=args.deny or [], deny_keys=args.deny_key or [], write=not args.no_write)


def _grant_lines(c: Any) -> str:
    expiry = "never" if c.expires is None else _when(c.expires)
    return f"grant of {c.name} (session {c.session_id}): {c.grant_text()}; expires {expiry}"


def cmd_issue(args: argparse.Namespace) -> int:
    issued = _issue(args)
    print(issued.header)
    print(_grant_lines(issued.credential), file=sys.stderr)
    print(f"(shown once: the vault keeps only its hash; revoke with `ownmem agent credential revoke {args.name}`)",
          file=sys.stderr)
    return 0


def cmd_narrow(args: argparse.Namespace) -> int:
    if not (args.deny or args.deny_key or args.no_write):
        raise VaultError("nothing to narrow: give --deny TAG, --deny-key KEY or --no-write")
    c = _credentials(args, sealing=True).narrow(args.name, deny_tags=args.deny or [], deny_keys=args.deny_key or [],
                                  no_write=args.no_write)
    print(_grant_lines(c))
    print("a running `ownmem agent` applies it from its next request")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    _credentials(args).revoke(args.name)
    print(f"revoked {args.name}; a running `ownmem agent` refuses it from its next request")
    return 0


def _ended_sessions(folder: Any) -> dict[str, str]:
    """session id -> "closed" | "revoked" of the SAIHM credentials' sessions that ended (revoked
    from another device, say), read-only from the service's session store; {} when there is none."""
    path = os.path.join(str(folder), DB_NAME)
    if not os.path.exists(path):
        return {}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = db.execute("SELECT session_id, doc FROM sessions WHERE session_id LIKE ?",
                              (SESSION_PREFIX + "%",)).fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return {}
    out = {}
    for sid, doc in rows:
        status = json.loads(doc).get("status")
        if status in ("closed", "revoked"):
            out[str(sid)] = str(status)
    return out


def cmd_list(args: argparse.Namespace) -> int:
    cf = _credentials(args)
    creds = cf.all()
    ended = _ended_sessions(cf.path.parent)
    now = int(time.time())
    if args.json:
        print(json.dumps([{"name": c.name, "created": c.created, "expires": c.expires, "last_used": c.last_used,
                           "expired": not c.live(now), "id": c.id, "session_id": c.session_id,
                           "session_ended": ended.get(c.session_id),
                           "agent_id": c.agent, "migrated": c.migrated, "sealed": c.mac is not None,
                           "grant": {"tags": list(c.tags), "keys": list(c.keys), "deny_tags": list(c.deny_tags),
                                     "deny_keys": list(c.deny_keys), "write": c.write}} for c in creds], indent=2))
        return 0
    if not creds:
        print("no agent credentials (issue one with `ownmem agent credential issue --name NAME`)")
    for c in creds:
        # without the key this command cannot check a seal; an entry with none is surely refused
        state = "" if c.live(now) else "  (expired)"
        state += "  (NOT SEALED: the service refuses it; not issued by you?)" if c.mac is None else ""
        if c.session_id in ended:
            state += f"  (session {ended[c.session_id]}: refused; revoke it here to remove it)"
        print(f"{c.name:<24} created {_when(c.created)}  expires {_when(c.expires)}  "
              f"last used {_when(c.last_used)}{state}")
        print(f"  session {c.session_id}: {c.grant_text()}")
        if c.migrated:
            print(f"  migrated from an older version with the grant it effectively had: narrow it with "
                  f"`ownmem agent credential narrow {c.name} --deny TAG`, or revoke it and issue it again")
    return 0


def mcp_command() -> tuple[str, list[str]]:
    """How an MCP host starts `ownmem mcp`: the absolute path, as hosts start servers with a bare PATH."""
    # the script beside this interpreter first: another `ownmem` on PATH may be another install
    beside = os.path.join(os.path.dirname(sys.executable), "ownmem")
    found = beside if os.path.exists(beside) else shutil.which("ownmem")
    if found:
        return os.path.abspath(found), ["mcp"]
    return sys.executable, ["-m", "ownmem.cli", "mcp"]


def host_config(header: str, port: int = DEFAULT_PORT) -> dict[str, Any]:
    command, argv = mcp_command()
    return {"mcpServers": {"ownmem": {"command": command, "args": argv, "env": {
        "SAIHM_ENDPOINT_URL": f"http://{DEFAULT_HOST}:{port}{PATH}", "SAIHM_AUTH_HEADER": header}}}}


def _minutes(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {s!r}") from None


def _ask(question: str) -> str:
    """One answer from the terminal; the question goes to stderr (stdout is the configuration)."""
    print(question, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        raise VaultError("no answer (end of input): give --grant TAG or run it on a terminal")
    return line


def ask_grant(counts: list[tuple[str, int]], ask: Callable[[str], str], *, may_write: bool | None = None,
              tries: int = 3) -> tuple[tuple[str, ...] | None, bool]:
    """The grant questions of `ownmem agent connect` on a terminal -> (tags or None for every
    tag, may write).  ``counts``: the vault's tags with how many memories carry each; ``ask``
    shows a question and returns the answer; ``may_write`` given (--no-write): not asked."""
    print("Tags of your memories:" if counts else "Your memories carry no tag yet.", file=sys.stderr)
    for tag, n in counts:
        print(visible(f"  {tag:<24} {n} memor{'y' if n == 1 else 'ies'}"), file=sys.stderr)
    choice = None
    for _ in range(tries):
        choice = parse_tags_answer(ask("Which tags may it read? [Enter: all] "), (t for t, _ in counts))
        if choice.problem is None:
            break
        print(visible(choice.problem), file=sys.stderr)
    if choice is None or choice.problem is not None:
        raise VaultError("no grant chosen")
    write = may_write
    for _ in range(tries if write is None else 0):
        write = parse_mode_answer(ask("Read-only, or read-write (its writes wait for you)? [r/W] "), default=True)
        if write is not None:
            break
        print("answer r (read-only) or w (read-write)", file=sys.stderr)
    if write is None:
        raise VaultError("no answer to read-only or read-write")
    return choice.tags, write


def _connect_port(given: int | None, folder: Path) -> int:
    """--port, else the port the running `ownmem agent` of this vault wrote (port.PortFile),
    else the default, said on stderr: the host must be told where the service listens."""
    if given is not None:
        return given
    running = PortFile.read(folder)
    if running is not None:
        print(f"ownmem agent runs on port {running.port} (pid {running.pid}): the configuration names it",
              file=sys.stderr)
        return running.port
    print(f"ownmem agent is not running for this vault: the configuration names the default port {DEFAULT_PORT}; "
          "start it with `ownmem agent` (or give --port PORT, the port it will listen on)", file=sys.stderr)
    return DEFAULT_PORT


def cmd_connect(args: argparse.Namespace) -> int:
    if args.minutes is not None and args.expires is not None:
        raise VaultError("give --minutes or --expires, not both")
    days = args.minutes / 1440 if args.minutes is not None else args.expires
    # no grant on the command line and a person at a terminal: ask (scripts pass --grant, --key or --deny)
    interactive = sys.stdin.isatty() and args.grant is None and args.key is None and args.deny is None
    vault = Vault(_folder(args))
    if not vault.exists():
        raise VaultError(f"no vault at {vault.folder} (create one with `ownmem init`)")
    pw, _ = _passphrase(str(vault.folder), bool(args.keyring))
    v = vault.unlock(pw)
    del pw
    try:
        key = v.purpose_key(CREDENTIALS_INFO)
        if interactive:
            counts = tag_counts(e.opened.tags for e in v.open_all().heads() if not is_control(e.opened.extensions))
            tags, write = ask_grant(counts, _ask, may_write=False if args.no_write else None)
        else:
            tags = tuple(args.grant) if args.grant is not None else (None if args.key is None else ())
            write = not args.no_write
    finally:
        v.close()
    port = _connect_port(args.port, vault.folder)
    issued = CredentialFile(vault.folder, key).issue(
        args.name, int(time.time()), expires_days=days, tags=tags, keys=args.key or [],
        deny_tags=args.deny or [], deny_keys=args.deny_key or [], write=write)
    print(json.dumps(host_config(issued.header, port), indent=2))
    print(_grant_lines(issued.credential), file=sys.stderr)
    print(f"Add this to your MCP host's configuration (Claude Desktop: claude_desktop_config.json; Claude Code: "
          f".mcp.json; Cursor: .cursor/mcp.json) and keep `ownmem agent` running.  The credential is shown once; "
          f"see it with `ownmem agent sessions`, revoke it there, on the Agents screen of any of your devices, or "
          f"with `ownmem agent credential revoke {args.name}`.", file=sys.stderr)
    return 0


def _grant_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grant", action="extend", nargs="+", metavar="TAG",
                   help="tags it may read (default, with no --key either: * = every tag and untagged memory)")
    p.add_argument("--key", action="extend", nargs="+", metavar="KEY", help="item keys or memory ids it may read")
    p.add_argument("--deny", action="extend", nargs="+", metavar="TAG", help="tags it may never read")
    p.add_argument("--deny-key", action="extend", nargs="+", metavar="KEY", help="keys it may never read")
    p.add_argument("--no-write", action="store_true", help="no writes, forgets or shares (default: staged writes)")
    p.add_argument("--expires", type=_days, metavar="DAYS", help="days until it expires (default: never)")


def _serve(args: argparse.Namespace) -> int:
    # imported here, not at the top: the service pulls in uvicorn, starlette and the MCP SDK
    # (about a second), which every other `ownmem` command would otherwise load for nothing
    from ownmem.cli.agent_serve import cmd_serve

    return cmd_serve(args)


def register(sub: Any) -> None:
    ag = sub.add_parser("agent", help="serve the vault to AI agents: a custodial SAIHM operator on 127.0.0.1")
    ag.add_argument("--host", default=DEFAULT_HOST, help=f"bind address (only {DEFAULT_HOST} is accepted)")
    ag.add_argument("--port", type=int, default=DEFAULT_PORT)
    ag.add_argument("--keyring", action="store_true",
                    help="take the passphrase from the OS keyring (and keep it there after the first unlock)")
    # per-credential write quotas (agent/quota.py; README "Agent quotas")
    d = Limits()
    ag.add_argument("--writes-per-minute", type=int, default=d.writes_per_minute, metavar="N",
                    help=f"writes and requests one credential may make per minute (default {d.writes_per_minute})")
    ag.add_argument("--write-bytes-per-minute", type=parse_size, default=d.bytes_per_minute, metavar="BYTES",
                    help="bytes of content one credential may write per minute (default 4MiB)")
    ag.add_argument("--max-staged", type=int, default=d.staged_count, metavar="N",
                    help=f"writes and requests of one credential waiting for you (default {d.staged_count})")
    ag.add_argument("--max-staged-bytes", type=parse_size, default=d.staged_bytes, metavar="BYTES",
                    help="bytes of one credential's staged writes waiting for you (default 32MiB)")
    ag.add_argument("--public-url", metavar="URL",
                    help="also serve MCP at URL/mcp to remote hosts (Claude, ChatGPT) with OAuth consent: "
                         "https://NAME[:PORT], a name of a machine you control")
    ag.add_argument("--tls-cert", metavar="FILE", help="the TLS certificate chain (PEM) for --public-url")
    ag.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    ag.add_argument("--public-bind", metavar="ADDRESS:PORT",
                    help="where the public listener binds (default 0.0.0.0 and the URL's port)")
    ag.set_defaults(fn=_serve)
    asub = ag.add_subparsers(dest="agent_cmd", metavar="SUBCOMMAND")

    cr = asub.add_parser("credential", help="issue, revoke, narrow or list agent credentials")
    csub = cr.add_subparsers(dest="credential_cmd", required=True, metavar="ACTION")
    iss = csub.add_parser("issue", help="print a new bearer credential (once); asks the passphrase")
    iss.add_argument("--name", required=True, help="the agent's name (its agent_id is NAME.<credential id>)")
    _grant_options(iss)
    iss.add_argument("--keyring", action="store_true", help="the passphrase from the OS keyring entry")
    iss.set_defaults(fn=cmd_issue)
    nw = csub.add_parser("narrow", help="narrow a credential's grant (deny tags or keys, stop its writes); "
                                        "asks the passphrase")
    nw.add_argument("name")
    nw.add_argument("--deny", action="extend", nargs="+", metavar="TAG", help="tags to deny")
    nw.add_argument("--deny-key", action="extend", nargs="+", metavar="KEY", help="keys to deny")
    nw.add_argument("--no-write", action="store_true", help="no more writes, forgets or shares")
    nw.add_argument("--keyring", action="store_true", help="the passphrase from the OS keyring entry")
    nw.set_defaults(fn=cmd_narrow)
    rv = csub.add_parser("revoke", help="revoke a credential (takes effect on the running service at once)")
    rv.add_argument("name")
    rv.set_defaults(fn=cmd_revoke)
    ls = csub.add_parser("list", help="list credentials: name, created, expires, last used")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(fn=cmd_list)

    cn = asub.add_parser("connect", help="issue a credential and print the MCP host configuration for it; "
                                         "asks the passphrase, and on a terminal without --grant/--key/--deny "
                                         "which tags it may read and whether it may write")
    cn.add_argument("name")
    _grant_options(cn)
    cn.add_argument("--minutes", type=_minutes, metavar="N", help="minutes until it expires (instead of --expires)")
    cn.add_argument("--port", type=int, default=None,
                    help="the port `ownmem agent` listens on (default: the running one's, else "
                         f"{DEFAULT_PORT})")
    cn.add_argument("--keyring", action="store_true", help="the passphrase from the OS keyring entry")
    cn.set_defaults(fn=cmd_connect)

    register_uomp(asub)

    manifest_cli.register(asub)
