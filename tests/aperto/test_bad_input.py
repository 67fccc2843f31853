"""Bad input to the format's vocabulary and key functions is ``MalformedInput``, never a bare
``ValueError`` (STYLE.md 5: one rooted error hierarchy)."""
from __future__ import annotations

import pytest

from ownmem.aperto import keys as K
from ownmem.aperto.model import MemType
from ownmem.crypto import provider, run_sync
from ownmem.errors import MalformedInput


@pytest.mark.parametrize("name", ["dream", "", "semantic ", "épisodic", None, 2, b"semantic", ["semantic"]])
def test_unknown_memory_type_is_malformed_input(name: object) -> None:
    with pytest.raises(MalformedInput, match="unknown memory type"):
        MemType.parse(name)


@pytest.mark.parametrize("name, want", [("semantic", MemType.SEMANTIC), ("EPISODIC", MemType.EPISODIC),
                                        ("Procedural", MemType.PROCEDURAL)])
def test_memory_type_by_name(name: str, want: MemType) -> None:
    assert MemType.parse(name) is want


def test_unknown_type_message_is_bounded() -> None:
    with pytest.raises(MalformedInput) as e:
        MemType.parse("x" * 10_000)
    assert len(str(e.value)) < 120


def test_format_info_string_cannot_derive_a_purpose_key() -> None:
    with pytest.raises(MalformedInput, match="apertomemory"):
        run_sync(K.derive_purpose_key(provider(), b"\x00" * 32, K.INFO_SIGN))  # type: ignore[arg-type]  # the point


def test_passphrase_that_is_not_text_is_malformed_input() -> None:
    with pytest.raises(MalformedInput, match="not valid text") as e:
        run_sync(K.master_from_passphrase(provider(), "caf\udce9", b"\x00" * 16))
    assert "caf" not in str(e.value)   # the passphrase never reaches an error message


def test_salt_of_wrong_length_is_malformed_input() -> None:
    with pytest.raises(MalformedInput, match="16 bytes"):
        run_sync(K.master_from_passphrase(provider(), "pw", b"\x00" * 15))
