"""`ownmem agent` itself: unlock, sync, and serve the SAIHM binding, the UOMP API and, with
--public-url, MCP for remote hosts (the parser is in agent.py, which imports this module only
when the service is started)."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from ownmem.agent.cimd import CimdFetcher
from ownmem.agent.credentials import CREDENTIALS_INFO, CredentialFile
from ownmem.agent.door import Door, TimedHttpTools, body_limits, body_timeout, header_timeout
from ownmem.agent.guarded import SaihmGuard
from ownmem.agent.local import LocalRemote, LocalSyncer, NoShares, PublishingRemote
from ownmem.agent.oauth import OAuthServer, passphrase_checker
from ownmem.agent.operator import AgentSyncer, Operator
from ownmem.agent.port import PATH, PortFile, check_bind
from ownmem.agent.quota import Limits
from ownmem.agent.service import Binding, SyncThread
from ownmem.agent.uomp_api import Uomp
from ownmem.agent.uomp_mount import KeyReads, mount
from ownmem.asgi import BodyDeadline, BodyTimeout
from ownmem.cli.common import KEYRING_SERVICE, folder as _folder, keyring_passphrase as _passphrase
from ownmem.errors import MalformedInput, VaultError
from ownmem.mcp.remote import BURST, RATE, Buckets, PublicServer, PublicUrl, RemoteMcp
from ownmem.scrub import forget_passphrase_env
from ownmem.vault import Vault
from ownmem.vault.local_receipts import LocalLog
from ownmem.vault.remote import Remote
from ownmem.vault.sync import Syncer
from ownmem.vault.vault import UnlockedVault


def cmd_serve(args: argparse.Namespace) -> int:

    check_bind(args.host)          # before anything is unlocked
    plan = _public_plan(args)      # so is every --public-url mistake, and an unreadable certificate
    folder = _folder(args)
    vault = Vault(folder)
    if not vault.exists():
        raise VaultError(f"no vault at {vault.folder} (create one with `ownmem init`)")
    pw, from_keyring = _passphrase(str(vault.folder), args.keyring)
    v = vault.unlock(pw)
    if args.keyring and not from_keyring:
        # only with --keyring: importing keyring looks for the OS's keyring backends
        import keyring

        keyring.set_password(KEYRING_SERVICE, str(vault.folder), pw)
    del pw
    # an agent of the same OS user reads /proc/<this service>/environ (scrub.py)
    if not forget_passphrase_env():
        print("ownmem agent: warning: OWNMEM_PASSPHRASE could not be wiped from /proc/self/environ, where "
              "agents of your OS user can read it (prefer the prompt or --keyring)", file=sys.stderr, flush=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # linked: receipts to the server's public log (the local log of a local-only past published
    # first); not linked: to the local receipts log, until `ownmem login` (agent/local.py)
    linked, local_log = Syncer.linked(v.store), LocalLog(vault.folder)
    remote: Remote = LocalRemote(local_log) if linked is None else PublishingRemote(linked[0], linked[1], local_log)
    op = Operator(v, remote, limits=Limits(args.writes_per_minute, args.write_bytes_per_minute, args.max_staged,
                                           args.max_staged_bytes),
                  syncer=LocalSyncer if linked is None else AgentSyncer)
    if linked is None:
        op.shared = NoShares(op.syncer)
        op.syncer.sync_once()     # the person's memories get their cells (and receipts) first
    else:
        op.catch_up()
    sync = SyncThread(op).start()
    where = (f"vault {linked[1]!r}" if linked is not None else
             f"this vault, local-only (no sync server: receipts in {local_log.path.name}; after `ownmem login` "
             "it syncs with that server)")
    print(f"ownmem agent: SAIHM endpoint http://{args.host}:{args.port}{PATH} for {where} "
          f"({len(op.index)} memories recallable)", file=sys.stderr, flush=True)
    creds = CredentialFile(vault.folder, v.purpose_key(CREDENTIALS_INFO))
    adopted = creds.migrate()       # once, the first start after the upgrade to sealed entries
    if adopted:
        print(f"ownmem agent: {len(adopted)} agent credential(s) issued before sealed credentials adopted once: "
              f"{', '.join(adopted)} (review them: `ownmem agent credential list`)", file=sys.stderr, flush=True)
    binding = Binding(op, creds)
    app = binding.app()


    uomp = mount(app, op, vault.folder, args.port)    # the UOMP Auth Service + Memory Guard, same app
    binding.guard = SaihmGuard(uomp, op, creds, now=uomp.now).start()   # every credential is a session
    app.add_exception_handler(BodyTimeout, body_timeout)     # in the protocol's shape (answers.refusal)
    # door.py: Host and Origin first, then the body's deadline; headers are cut at 10 s, as the
    # blind server cuts them (httptools kept: the Guard's hot path parses with it)
    grace, rate = body_limits()
    TimedHttpTools.header_timeout = header_timeout()
    served = Door(BodyDeadline(KeyReads(app, uomp), grace=grace, min_rate=rate), args.port)
    public = None if plan is None else _public(plan, binding, uomp, v, vault.folder, creds, (grace, rate))
    here = PortFile(args.host, args.port, os.getpid())
    _remove_at_sigterm(here, vault.folder)
    try:
        here.write(vault.folder)      # where `ownmem agent connect` finds this service
        # no proxy headers: nothing stands between a client and this loopback port, and an
        # X-Forwarded-For from a local process must not rename it
        uvicorn.run(served, host=args.host, port=args.port, log_level="warning", access_log=False,
                    proxy_headers=False, http=TimedHttpTools)
    finally:
        here.remove(vault.folder)
        if public is not None:
            public.stop()
        sync.stop()
        binding.guard.stop()
        uomp.close()
        with op.lock:
            op.close()
            v.close()
    return 0


def _remove_at_sigterm(here: PortFile, folder: Path) -> None:
    """uvicorn ends a SIGTERM'd service by raising the signal again once it has shut down, under
    the handler it found: no ``finally`` runs then.  This handler removes the port file first and
    then dies of the signal as before (the exit status a service manager expects)."""
    def on_term(sig: int, frame: object) -> None:
        here.remove(folder)
        signal.signal(sig, signal.SIG_DFL)
        signal.raise_signal(sig)
    signal.signal(signal.SIGTERM, on_term)


@dataclass(frozen=True, slots=True)
class PublicPlan:
    """What --public-url and its options ask for, checked before the vault is unlocked."""

    url: PublicUrl
    host: str
    port: int
    cert: str | None
    key: str | None


def _public_plan(args: argparse.Namespace) -> PublicPlan | None:
    if args.public_url is None:
        if args.tls_cert or args.tls_key or args.public_bind:
            raise MalformedInput("--tls-cert, --tls-key and --public-bind go with --public-url")
        return None
    url = PublicUrl.parse(args.public_url)
    if url.tls != bool(args.tls_cert and args.tls_key):
        raise MalformedInput("an https --public-url needs --tls-cert and --tls-key (and an http one, on "
                             "loopback, neither)")
    host, port = _bind(args.public_bind, url)
    if port == args.port and host in (args.host, "0.0.0.0", "::"):
        raise MalformedInput("--public-bind must differ from the local port")
    if url.tls:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as e:
            raise MalformedInput(f"--tls-cert/--tls-key: not a readable PEM certificate chain and its key "
                                 f"({type(e).__name__}: {e})") from None
    return PublicPlan(url, host, port, args.tls_cert, args.tls_key)


def _public(plan: PublicPlan, binding: Binding, uomp: Uomp, v: UnlockedVault, folder: Path,
            creds: CredentialFile, body: tuple[float, float]) -> PublicServer:
    """The remote door (MCP at /mcp behind OAuth) on its own listener."""
    url = plan.url
    oauth = OAuthServer(folder=folder, creds=creds, auth_key=uomp.key, sessions=uomp.sessions,
                        audit=uomp.audit, public_url=url.origin, check_passphrase=passphrase_checker(v),
                        fetcher=CimdFetcher.from_env())
    rate = float(os.environ.get("OWNMEM_PUBLIC_RATE") or RATE)
    if not rate > 0:
        raise MalformedInput("OWNMEM_PUBLIC_RATE must be a positive number of requests a second")
    app = RemoteMcp(binding, oauth, url, Buckets(rate, max(1, int(rate * BURST))), body).app()
    try:
        server = PublicServer(app, plan.host, plan.port, plan.cert, plan.key).start()
    except OSError as e:
        raise VaultError(f"the public listener cannot bind {plan.host}:{plan.port} ({e.strerror or e})") from None
    print(f"ownmem agent: MCP for remote hosts at {url.resource} (listening on {plan.host}:{plan.port}"
          f"{', TLS 1.3' if url.tls else ''}); add that URL to Claude (Settings > Connectors > Add custom "
          "connector) or ChatGPT", file=sys.stderr, flush=True)
    return server


def _bind(value: str | None, url: PublicUrl) -> tuple[str, int]:
    default_port = int(url.origin.rsplit(":", 1)[1]) if url.origin.count(":") == 2 else (443 if url.tls else 80)
    if value is None:
        return ("0.0.0.0" if url.tls else "127.0.0.1"), default_port
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise MalformedInput("--public-bind is ADDRESS:PORT, e.g. 0.0.0.0:8443")
    return host.strip("[]"), int(port)
