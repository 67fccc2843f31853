"""The one error family of ownmem.

Every error raised across a public API is an ``OwnmemError``; each subclass names
what the caller can do about it.  Authentication failures are deliberately opaque:
one message for every cause, so an attacker probing with forged objects learns
nothing about which check failed (the spec's refusal reason stays in ``reason``
for tests and audit, never in ``str()``).
"""
from __future__ import annotations


class OwnmemError(Exception):
    """Root of every error ownmem raises on purpose."""

    code = "error"


class MalformedInput(OwnmemError):
    """Bytes that do not parse as the structure they claim to be. Fix or drop the input."""

    code = "malformed"


class LimitExceeded(MalformedInput):
    """Input asks for more work or memory than ownmem allows (size, depth, count)."""

    code = "limit_exceeded"


class AuthenticationFailed(OwnmemError):
    """An object, container or credential could not be authenticated.  Do not use it."""

    code = "not_authenticated"

    def __init__(self, reason: str = "unspecified") -> None:
        super().__init__("could not authenticate")
        self.reason = reason  # for tests and audit; never shown to an attacker-facing caller


class ProducerRefusal(OwnmemError):
    """ownmem refuses to write an object that would violate the format (draft-02 §3.2 "What a
    Producer Must Refuse to Write")."""

    code = "refused_to_write"


class WrongPassphrase(OwnmemError):
    """The passphrase does not derive the expected identity.  Ask again."""

    code = "wrong_passphrase"

    def __init__(self, message: str = "wrong passphrase") -> None:
        super().__init__(message)


class NoSuchVault(WrongPassphrase):
    """No vault holds this name on the server (it said so when asked; a server that cannot say
    leaves a plain WrongPassphrase).  Check the name and the server address."""

    code = "no_such_vault"


class ImportRefused(OwnmemError):
    """A container cannot be imported into this vault as a whole (identity, metadata)."""

    code = "import_refused"


class VaultError(OwnmemError):
    """The local vault cannot do what was asked (absent, locked, conflicting state)."""

    code = "vault"


class NotFound(VaultError):
    """No memory, scope or key by that name or id."""

    code = "not_found"


class ServiceDown(VaultError):
    """The local ``ownmem agent`` service does not answer (not running, or on another port)."""

    code = "service_down"


class StoreError(VaultError):
    """The vault's SQLite file failed under an operation (locked by another process, disk
    full, damaged).  Nothing of that operation was kept; retry, or restore from an export."""

    code = "store"


class SyncError(OwnmemError):
    """The sync server could not be reached or refused a request.  Retry later or check the URL."""

    code = "sync"

    def __init__(self, message: str, server_code: str | None = None, status: int | None = None,
                 vault: str | None = None) -> None:
        super().__init__(message)
        self.server_code = server_code
        self.status = status
        self.vault = vault     # keys_registered: the vault these keys hold on that server


class PassphraseChanged(SyncError):
    """The vault's passphrase was changed on another device: this device's passphrase no longer
    opens what the server holds.  Enter the new one (``ownmem passphrase update``)."""

    code = "passphrase_changed"

    def __init__(self, message: str = "the passphrase of this vault was changed on another device: "
                 "enter the new one (`ownmem passphrase update`)") -> None:
        super().__init__(message)


class DeviceRemoved(SyncError):
    """This device was removed from the vault on another device: the server no longer lets it log in
    or enrol.  What it already holds stays readable here; nothing written afterwards reaches it."""

    code = "device_removed"

    def __init__(self, message: str = "this device was removed from the vault on another device: it can no "
                 "longer sync. What it already holds stays readable here; nothing written from now on reaches it.",
                 ) -> None:
        super().__init__(message, "device_removed", 403)


class WireError(SyncError):
    """A sync message does not parse as what the protocol says it is (ownmem.wire).

    On a device: the server's answer was malformed, so nothing of it was used; the server
    is broken, not ownmem's, or hostile.  The blind server refuses a request that fails the
    same parse with its 400 ``malformed``."""

    code = "bad_server_answer"

    def __init__(self, message: str) -> None:
        super().__init__(message)
