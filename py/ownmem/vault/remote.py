"""The blind sync server's API for one vault, over HTTP (DESIGN.md "Sync"): ``Remote`` sends
each request and parses each answer into its ``ownmem.wire`` message; ``refusal`` turns an
answer that is not 2xx into one SyncError."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

try:
    import httpx
except ImportError:  # pragma: no cover - under Pyodide, where ownmem.web.remote speaks fetch instead
    httpx = None  # type: ignore[assignment]

from ownmem.aperto import keys as aperto_keys
from ownmem.crypto import provider, run_sync, sha256
from ownmem.errors import DeviceRemoved, OwnmemError, SyncError, WireError
from ownmem.saihm.receipt import parse_receipt
from ownmem.wire import codec, messages, signed
from ownmem.wire.devices import DeviceInfo, DeviceList, DeviceRemoval
from ownmem.wire.errors import ErrorCode
from ownmem.wire.limits import MAX_ANSWER, valid_vault_name

if TYPE_CHECKING:
    from ownmem.vault.devicekey import DeviceAuth

PULL_PAGE = 5000
TIMEOUT = 30.0
JSON = "application/json"


def refusal(status: int, body: bytes) -> SyncError:
    """A non-2xx answer as one SyncError, with the server's stable code when its body is a
    well-formed ErrorBody (a proxy's HTML page is not: then only the status is known)."""
    try:
        doc = codec.load_json(body)
        err = messages.ErrorBody.parse(doc)
    except WireError:
        return SyncError(f"server refused: HTTP {status}", None, status)
    if err.error == ErrorCode.DEVICE_REMOVED:
        return DeviceRemoved()
    vault = doc.get("vault") if err.error == ErrorCode.KEYS_REGISTERED else None
    return SyncError(f"server refused: {err.message}", err.error, status,
                     vault if isinstance(vault, str) and valid_vault_name(vault) else None)


class Remote:
    """The blind server's sync API for one vault name.  Every answer is parsed into its
    ``ownmem.wire`` message before anything of it is used; a malformed one is a
    ``WireError``.  Only ``_exchange`` touches the network (the browser's subclass speaks fetch)."""

    def __init__(self, base_url: str, name: str, *, client: httpx.Client | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise SyncError("the server URL must start with http:// or https://")
        if not valid_vault_name(name):
            raise SyncError("vault names are 1-64 of a-z 0-9 . _ - and start with a letter or digit")
        self.base = base_url.rstrip("/")
        self.name = name
        self.http = client if client is not None else (
            httpx.Client(timeout=TIMEOUT, follow_redirects=False) if httpx is not None else None)
        self.token: str | None = None

    def _url(self, path: str) -> str:
        return f"{self.base}/v1/vaults/{self.name}{path}"

    def _exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        """One request -> (status, body), the body read to at most ``MAX_ANSWER`` bytes."""
        if self.http is None:
            raise SyncError("no HTTP client in this runtime")
        try:
            with self.http.stream(method, url, content=body, headers=headers, follow_redirects=False) as r:
                data = bytearray()
                for chunk in r.iter_bytes():
                    data += chunk
                    if len(data) > MAX_ANSWER:
                        raise WireError(f"the server's answer is over {MAX_ANSWER} bytes")
                return r.status_code, bytes(data)
        except httpx.HTTPError as e:
            raise SyncError(f"cannot reach the server at {self.base} ({type(e).__name__})") from None

    def _req(self, method: str, url: str, body: bytes | None = None, content_type: str | None = None,
             *, auth: bool = False) -> bytes:
        """The body of a 2xx answer; any other answer is a SyncError (a redirect too: never followed)."""
        headers = {"Content-Type": content_type} if content_type else {}
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        status, data = self._exchange(method, url, body, headers)
        if not 200 <= status < 300:
            raise refusal(status, data)
        return data

    def _json(self, method: str, url: str, msg: codec.JsonMessage | None = None, *, auth: bool = False) -> Any:
        body = codec.dump_json(msg.encode()) if msg is not None else None
        return codec.load_json(self._req(method, url, body, JSON if msg is not None else None, auth=auth))

    def lookup(self) -> messages.VaultInfo | None:
        """The vault's public keys, or None if the server has no vault of that name."""
        try:
            info = messages.VaultInfo.parse(self._json("GET", self._url("")))
        except SyncError as e:
            if e.server_code == ErrorCode.UNKNOWN_VAULT:
                return None
            raise
        if info.name != self.name:
            raise WireError("the server answered with another vault")
        return info

    def recovery_record(self) -> bytes:
        """The recovery kit's public record (vault/recovery.py), or the server's decoy for a vault
        without one (public: a new device asks it with the name and the kit's words only)."""
        return messages.RecoveryRecord.parse(self._json("GET", self._url("/recovery"))).record

    def register(self, reg: messages.Registration, *, another_name: bool = False) -> messages.Registered:
        """``another_name``: register these keys under this name even if they hold a vault here
        already (else the server answers ``keys_registered`` naming it)."""
        body = reg.encode() | ({"another_name": True} if another_name else {})
        return messages.Registered.parse(codec.load_json(self._req("POST", f"{self.base}/v1/vaults",
                                                                   codec.dump_json(body), JSON)))

    def name_taken(self) -> bool | None:
        """Whether a vault holds this name here (GET /v1/names, paid from the address's registration
        budget); None when the server cannot say (an older server, the budget spent, offline)."""
        try:
            got = codec.load_json(self._req("GET", f"{self.base}/v1/names/{self.name}"))
        except SyncError:
            return None
        taken = got.get("taken") if isinstance(got, dict) else None
        return taken if isinstance(taken, bool) else None

    def login(self, sync_key: aperto_keys.SigningKey, device: DeviceAuth | None = None) -> None:
        """A session: the sync key's proof and, with ``device``, this device's (vault/devicekey.py)."""
        c = messages.Challenge.parse(self._json("POST", self._url("/challenge"))).challenge
        sig = run_sync(provider().ed25519_sign(sync_key.seed, signed.auth_message(self.name, c)))
        body = messages.SessionRequest(c, sig).encode()
        if device is not None:
            body["device"] = run_sync(device.login_part(provider(), self.name, c))
        answer = codec.load_json(self._req("POST", self._url("/session"), codec.dump_json(body), JSON))
        self.token = messages.Session.parse(answer).token

    def devices(self) -> tuple[DeviceInfo, ...]:
        return DeviceList.parse(self._json("GET", self._url("/devices"), auth=True)).devices

    def remove_device(self, device: bytes, owner_sig: bytes) -> tuple[DeviceInfo, ...]:
        """Remove a device (owner-signed) -> the devices left."""
        got = DeviceList.parse(self._json("POST", self._url(f"/devices/{device.hex()}/remove"),
                                          DeviceRemoval(owner_sig), auth=True)).devices
        if any(d.device_id == device for d in got):
            raise WireError("the server still lists the device it says it removed")
        return got

    def get_metadata(self) -> messages.MetadataVersion:
        return messages.MetadataVersion.parse(self._json("GET", self._url("/metadata"), auth=True))

    def put_metadata(self, update: messages.MetadataUpdate) -> int:
        """Compare-and-swap -> the new version (a 409 ``stale_version`` if it moved on)."""
        got = messages.MetadataAccepted.parse(self._json("PUT", self._url("/metadata"), update, auth=True))
        if got.version != update.expected_version + 1:
            raise WireError("the server stored the metadata under another version than the next")
        return got.version

    def rekey(self, update: messages.Rekey) -> int:
        """A passphrase change (vault/rekey.py) -> the new metadata version."""
        got = messages.MetadataAccepted.parse(self._json("POST", self._url("/rekey"), update, auth=True))
        if got.version != update.expected_version + 1:
            raise WireError("the server stored the metadata under another version than the next")
        return got.version

    def push(self, req: messages.PushRequest) -> messages.PushResult:
        return messages.PushResult.parse(codec.load_json(self._req("POST", self._url("/cells"), req.encode(),
                                                        "application/cbor", auth=True)))

    def changes(self, since: int, limit: int = PULL_PAGE) -> messages.ChangesPage:
        raw = self._req("GET", self._url(f"/changes?since={since}&limit={limit}"), auth=True)
        return messages.ChangesPage.parse(raw, since)

    def erase(self, receipts: list[bytes]) -> messages.EraseResult:
        return messages.EraseResult.parse(self._json("POST", self._url("/erase"),
                                                     messages.EraseRequest(tuple(receipts)), auth=True))

    def rewrap(self, cell_ids: list[bytes], wrapped_deks: list[bytes]) -> messages.RewrapResult:
        """A scope rotation's new wrapped DEKs for cells the vault holds (vault/rotate_sync.py)."""
        return messages.RewrapResult.parse(self._json("POST", self._url("/rewrap"), messages.RewrapRequest(
            tuple(cell_ids), tuple(wrapped_deks)), auth=True))

    def post_receipts(self, receipts: list[bytes]) -> tuple[bytes, ...]:
        """Log holder-signed REMEMBER/RECALL/STATUS receipts -> the receiptIds the server logged."""
        got = messages.ReceiptsLogged.parse(self._json("POST", self._url("/receipts"),
                                                   messages.ReceiptsRequest(tuple(receipts)), auth=True))
        return got.logged

    def get_receipt(self, receipt_id: bytes) -> bytes | None:
        """The receipt the public log holds under ``receipt_id``, or None if it holds none.
        Its bytes must hash to that id: a server cannot answer with another receipt."""
        try:
            # with this vault's credential the read is the vault's, not its address's (issue 19)
            entry = self._json("GET", f"{self.base}/v1/log/{receipt_id.hex()}", auth=self.token is not None)
        except SyncError as e:
            if e.server_code == ErrorCode.NOT_FOUND:
                return None
            raise
        raw = entry.get("receipt") if isinstance(entry, dict) else None
        try:
            got = bytes.fromhex(raw) if isinstance(raw, str) else b""
            r = parse_receipt(got)
        except (ValueError, OwnmemError):
            raise WireError("the log's entry is malformed") from None
        if r.receipt_id != receipt_id or sha256(r.body()) != receipt_id:
            raise WireError("the log answered with another receipt than the one asked for")
        return got

    def events(self) -> Iterator[int]:
        """Yields the server's last sequence number whenever it changes (server-sent events)."""
        if self.http is None:
            raise SyncError("no HTTP client in this runtime")
        try:
            with self.http.stream("GET", self._url("/events"), headers={"Authorization": f"Bearer {self.token}"},
                                  timeout=httpx.Timeout(TIMEOUT, read=60.0), follow_redirects=False) as r:
                if not 200 <= r.status_code < 300:
                    raise SyncError("the server refused the event stream", None, r.status_code)
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        yield messages.LiveEvent.parse(codec.load_json(line[6:])).last_seq
        except httpx.HTTPError as e:
            raise SyncError(f"lost the event stream ({type(e).__name__})") from None
