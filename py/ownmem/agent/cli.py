"""`ownmem agent` and its subcommands (registered into the main parser by ``register``).

    ownmem agent [--port 9374] [--host 127.0.0.1] [--keyring]    run the service
    ownmem agent credential issue --name NAME [--expires DAYS]   print a credential, once
    ownmem agent credential revoke NAME
    ownmem agent credential list [--json]
    ownmem agent connect NAME [--expires DAYS] [--port 9374]     issue + the MCP host snippet

Credentials need no passphrase: the file holds only their hashes.  The service needs the
vault unlocked; ``--keyring`` takes the passphrase from the OS keyring (the ``keyring``
package) and, after a first successful unlock with the passphrase, keeps it there.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Any

from ..cli import _folder, _when
from ..cli import _passphrase as cli_passphrase
from ..errors import VaultError
from .credentials import CredentialFile
from .quota import Limits, parse_size
from .service import DEFAULT_HOST, DEFAULT_PORT, PATH, check_bind

KEYRING_SERVICE = "ownmem"


def _credentials(args: argparse.Namespace) -> CredentialFile:
    from ..vault import Vault

    v = Vault(_folder(args))
    if not v.exists():
        raise VaultError(f"no vault at {v.folder} (create one with `ownmem init`)")
    return CredentialFile(v.folder)


def _days(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {s!r}") from None


def cmd_issue(args: argparse.Namespace) -> int:
    issued = _credentials(args).issue(args.name, int(time.time()), expires_days=args.expires)
    print(issued.header)
    print(f"(shown once: the vault keeps only its hash; revoke with `ownmem agent credential revoke {args.name}`)",
          file=sys.stderr)
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    _credentials(args).revoke(args.name)
    print(f"revoked {args.name}; a running `ownmem agent` refuses it from its next request")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    creds = _credentials(args).all()
    now = int(time.time())
    if args.json:
        print(json.dumps([{"name": c.name, "created": c.created, "expires": c.expires, "last_used": c.last_used,
                           "expired": not c.live(now)} for c in creds], indent=2))
        return 0
    if not creds:
        print("no agent credentials (issue one with `ownmem agent credential issue --name NAME`)")
    for c in creds:
        state = "" if c.live(now) else "  (expired)"
        print(f"{c.name:<24} created {_when(c.created)}  expires {_when(c.expires)}  "
              f"last used {_when(c.last_used)}{state}")
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


def cmd_connect(args: argparse.Namespace) -> int:
    issued = _credentials(args).issue(args.name, int(time.time()), expires_days=args.expires)
    print(json.dumps(host_config(issued.header, args.port), indent=2))
    print(f"Add this to your MCP host's configuration (Claude Desktop: claude_desktop_config.json; Cursor: "
          f".cursor/mcp.json) and keep `ownmem agent` running.  The credential is shown once; revoke it with "
          f"`ownmem agent credential revoke {args.name}`.", file=sys.stderr)
    return 0


def _passphrase(folder: str, use_keyring: bool) -> tuple[str, bool]:
    """-> (passphrase, whether it came from the keyring)."""
    if use_keyring:
        import keyring
        import keyring.errors

        try:
            pw = keyring.get_password(KEYRING_SERVICE, folder)
        except keyring.errors.KeyringError as e:
            raise VaultError(f"the OS keyring cannot be read ({type(e).__name__})") from None
        if pw:
            return pw, True
    return cli_passphrase(), False


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from ..vault import Vault
    from ..vault.sync import Syncer, Remote
    from .operator import Operator
    from .service import Binding, SyncThread

    check_bind(args.host)          # before anything is unlocked
    folder = _folder(args)
    vault = Vault(folder)
    if not vault.exists():
        raise VaultError(f"no vault at {vault.folder} (create one with `ownmem init`)")
    pw, from_keyring = _passphrase(str(vault.folder), args.keyring)
    v = vault.unlock(pw)
    if args.keyring and not from_keyring:
        import keyring

        keyring.set_password(KEYRING_SERVICE, str(vault.folder), pw)
    del pw
    linked = Syncer.linked(v.store)
    if linked is None:
        v.close()
        raise VaultError("this vault is not linked to a server (run `ownmem login --server URL --vault-name NAME`): "
                         "agent writes need the public receipt log")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    op = Operator(v, Remote(linked[0], linked[1]),
                  limits=Limits(args.writes_per_minute, args.write_bytes_per_minute, args.max_staged,
                                args.max_staged_bytes))
    op.catch_up()
    sync = SyncThread(op).start()
    print(f"ownmem agent: SAIHM endpoint http://{args.host}:{args.port}{PATH} for vault {linked[1]!r} "
          f"({len(op.index)} memories recallable)", file=sys.stderr, flush=True)
    app = Binding(op, CredentialFile(vault.folder)).app()
    from ..uomp.api import KeyReads, mount

    uomp = mount(app, op, vault.folder, args.port)    # the UOMP Auth Service + Memory Guard, same app
    try:
        # no proxy headers: nothing stands between a client and this loopback port, and an
        # X-Forwarded-For from a local process must not rename it
        uvicorn.run(KeyReads(app, uomp), host=args.host, port=args.port, log_level="warning", access_log=False,
                    proxy_headers=False)
    finally:
        sync.stop()
        uomp.close()
        with op.lock:
            op.close()
            v.close()
    return 0


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
    ag.set_defaults(fn=cmd_serve)
    asub = ag.add_subparsers(dest="agent_cmd", metavar="SUBCOMMAND")

    cr = asub.add_parser("credential", help="issue, revoke or list agent credentials")
    csub = cr.add_subparsers(dest="credential_cmd", required=True, metavar="ACTION")
    iss = csub.add_parser("issue", help="print a new bearer credential (once)")
    iss.add_argument("--name", required=True, help="the agent's name (its agent_id in the memories it writes)")
    iss.add_argument("--expires", type=_days, metavar="DAYS", help="days until it expires (default: never)")
    iss.set_defaults(fn=cmd_issue)
    rv = csub.add_parser("revoke", help="revoke a credential (takes effect on the running service at once)")
    rv.add_argument("name")
    rv.set_defaults(fn=cmd_revoke)
    ls = csub.add_parser("list", help="list credentials: name, created, expires, last used")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(fn=cmd_list)

    cn = asub.add_parser("connect", help="issue a credential and print the MCP host configuration for it")
    cn.add_argument("name")
    cn.add_argument("--expires", type=_days, metavar="DAYS")
    cn.add_argument("--port", type=int, default=DEFAULT_PORT, help="the port `ownmem agent` listens on")
    cn.set_defaults(fn=cmd_connect)

    from ..uomp.cli import register as register_uomp

    register_uomp(asub)

    from ..uomp import manifest_cli
    manifest_cli.register(asub)
