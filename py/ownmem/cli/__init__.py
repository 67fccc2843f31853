"""The `ownmem` command line: the parser and the entry point; one module per command group
(vault.py, passwd.py, recovery.py, devices.py, log.py, share.py, agent.py with agent_serve.py,
sessions.py, manifest.py, records.py, staged.py), all sharing common.py.

The vault folder comes from --vault or OWNMEM_VAULT (default ~/.ownmem); the
passphrase from OWNMEM_PASSPHRASE or a prompt, never from an argument (argv is
visible to every user of the machine).  Every failure is one line on stderr and a
non-zero exit; no traceback and no secret ever reaches the terminal.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ownmem import __version__
from ownmem.cli import agent, devices, log, passwd, records, recovery, rotate, share, staged, vault
from ownmem.cli.common import EXIT_ERROR, EXIT_USAGE, CliError, Parser
from ownmem.errors import OwnmemError
from ownmem.termsafe import guarded, visible


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ownmem", description="User-owned, end-to-end encrypted AI memory.")
    p.add_argument("--version", action="version", version=f"ownmem {__version__}")
    p.add_argument("--vault", help="vault folder (default: $OWNMEM_VAULT or ~/.ownmem)")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    vault.register(sub)
    passwd.register(sub)     # passphrase change|update
    recovery.register(sub)   # recovery create|use
    devices.register(sub)    # devices [list] | remove ID
    rotate.register(sub)     # identity rotate (scope rotate is under scope)
    log.register(sub)
    agent.register(sub)      # agent ..., with its sessions and manifest subcommands
    share.register(sub)      # whoami, share ...
    records.register(sub)
    staged.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    # Everything the CLI writes (vault.db and its WAL, exports) holds ciphertext an attacker
    # could take offline to guess the passphrase: readable by this user only.
    os.umask(0o077)
    # Every byte the CLI prints passes termsafe: memory text, agent names, audit keys and server
    # messages are someone else's, and a terminal obeys an escape sequence it is given.
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = guarded(out), guarded(err)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(argv: Sequence[str] | None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        return int(args.fn(args))
    # one line each: a message may quote a server's or an agent's text
    except CliError as e:
        print(f"ownmem: {visible(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except OwnmemError as e:
        print(f"ownmem: {visible(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except ValueError as e:  # MemType.parse and friends
        print(f"ownmem: {visible(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ownmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # noqa: BLE001 - one line, never a traceback; the type only, never data
        print(f"ownmem: unexpected error ({type(e).__name__}); please report it", file=sys.stderr)
        return EXIT_ERROR

