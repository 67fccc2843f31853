"""The device messages (ApertoMemory "Device and Key Revocation"; docs/decisions.md "15.7"):
each device holds a random Ed25519 key of its own, enrolled by the owner key in force.

    message           route                                          body
    DeviceLogin       in POST /v1/vaults/{name}/session, key "device" -> JSON
    DeviceEnrolment   in DeviceLogin, key "enrol" (optional)         -> JSON
    DeviceList        GET  /v1/vaults/{name}/devices                 <- JSON
    DeviceRemoval     POST /v1/vaults/{name}/devices/{id}/remove     -> JSON (answered by DeviceList)

A device's id is the first 16 bytes of SHA-256 of its public key (``device_id``), so the
server cannot name a device with a key it did not enrol.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from ownmem.crypto import sha256
from ownmem.errors import WireError
from ownmem.wire.codec import Counter, Hex, JsonMessage, Key, MessageList, Signature, Text

DEVICE_ID_LEN = 16
LABEL_LEN = 64            # a device's name as the person gives it, in characters
# what the server keeps of it: sealed (vault/devicekey.py), "s1." and base64url of a nonce, at
# most 4 UTF-8 bytes per character and a tag; the server reads it as opaque text
SEALED_LABEL_LEN = 3 + (12 + 4 * LABEL_LEN + 16 + 2) // 3 * 4
MAX_DEVICES = 32
DeviceId = Annotated[bytes, Hex(DEVICE_ID_LEN)]
Label = Annotated[str, Text(None, SEALED_LABEL_LEN)]


def device_id(device_pub: bytes) -> bytes:
    return sha256(device_pub)[:DEVICE_ID_LEN]


@dataclass(frozen=True, slots=True)
class DeviceEnrolment(JsonMessage):
    """The owner key in force's signature over ``signed.device_enrol_message``."""

    label: Label
    owner_sig: Signature

    def check(self) -> None:
        if not self.label.strip():
            raise WireError("label must not be empty")


@dataclass(frozen=True, slots=True)
class DeviceLogin(JsonMessage):
    """The device key's signature over ``signed.device_auth_message`` for this login's challenge."""

    device_pub: Key
    signature: Signature

    @staticmethod
    def parse_optional(body: dict[str, Any]) -> tuple[DeviceLogin | None, DeviceEnrolment | None]:
        """The ``device`` of a session request, and its ``enrol`` if any (an older client sends neither)."""
        raw = body.get("device")
        if raw is None:
            return None, None
        login = DeviceLogin.parse(raw)
        enrol = raw.get("enrol")
        return login, (DeviceEnrolment.parse(enrol) if enrol is not None else None)


@dataclass(frozen=True, slots=True)
class DeviceInfo(JsonMessage):
    device_id: DeviceId
    label: Label
    added_at: Counter
    last_sync: Counter


@dataclass(frozen=True, slots=True)
class DeviceList(JsonMessage):
    devices: Annotated[tuple[DeviceInfo, ...], MessageList(DeviceInfo, 0, MAX_DEVICES)]


@dataclass(frozen=True, slots=True)
class DeviceRemoval(JsonMessage):
    """The owner key in force's signature over ``signed.device_remove_message``."""

    signature: Signature
