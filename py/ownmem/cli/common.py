"""What every `ownmem` command module shares: the usage error, the parser class, the vault
folder, the passphrase (environment or prompt, never argv), unlocking, progress and dates."""
from __future__ import annotations

import argparse
import getpass
import os
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from ownmem.errors import OwnmemError, VaultError
from ownmem.termsafe import raw
from ownmem.vault import UnlockedVault, Vault

# the OS keyring's service name of `ownmem agent --keyring`
KEYRING_SERVICE = "ownmem"

EXIT_ERROR = 1
EXIT_USAGE = 2


class CliError(OwnmemError):
    code = "usage"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one `ownmem:` line like every other failure."""

    def error(self, message: str) -> NoReturn:
        head, sep, rest = message.partition("unrecognized arguments: ")
        if sep:  # name stray options, never echo values: one may be a passphrase typed by mistake
            opts = [a.split("=", 1)[0] for a in rest.split() if a.startswith("-")]
            message = head + "unrecognized arguments" + (f": {' '.join(opts)}" if opts else "")
        self.exit(EXIT_USAGE, f"ownmem: {message} (see `{self.prog} --help`)\n")


def passphrase(confirm: bool = False) -> str:
    pw = os.environ.get("OWNMEM_PASSPHRASE")
    if pw:
        return pw
    if not sys.stdin.isatty():
        raise CliError("no passphrase: set OWNMEM_PASSPHRASE or run in a terminal")
    try:
        pw = getpass.getpass("passphrase: ")
        if confirm and getpass.getpass("passphrase (again): ") != pw:
            raise CliError("the two passphrases differ")
    except (EOFError, KeyboardInterrupt):
        raise CliError("no passphrase given") from None
    if not pw:
        raise CliError("the passphrase must not be empty")
    return pw


def folder(args: argparse.Namespace) -> str:
    return os.path.expanduser(args.vault or os.environ.get("OWNMEM_VAULT") or "~/.ownmem")


def unlock(args: argparse.Namespace) -> UnlockedVault:
    v = Vault(folder(args))
    if not v.exists():
        raise VaultError(f"no vault at {v.folder} (create one with `ownmem init`)")
    return v.unlock(passphrase())


def progress(label: str) -> Callable[[int, int], None] | None:
    """A one-line progress counter on a terminal; silent when piped."""
    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if done != total and now - last[0] < 0.1:
            return
        last[0] = now
        pct = 100 * done // total if total else 100
        err = raw(sys.stderr)     # our own CR, nothing foreign in this line
        err.write(f"\r{label}: {done}/{total} ({pct}%)" + ("\n" if done == total else ""))
        err.flush()
    return show


def tags(s: str | None) -> list[str]:
    return [t.strip() for t in (s or "").split(",") if t.strip()]


def confidence(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None


def when(ts: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def keyring_passphrase(folder: str, use_keyring: bool) -> tuple[str, bool]:
    """-> (passphrase, whether it came from the keyring)."""
    if use_keyring:
        # only with --keyring: importing keyring looks for the OS's keyring backends
        import keyring
        import keyring.errors

        try:
            pw = keyring.get_password(KEYRING_SERVICE, folder)
        except keyring.errors.KeyringError as e:
            raise VaultError(f"the OS keyring cannot be read ({type(e).__name__})") from None
        if pw:
            return pw, True
    return passphrase(), False
