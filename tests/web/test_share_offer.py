"""The Offer form's fields as the worker checks them (ownmem.web.shares.offer_request)
before the vault's sharing code runs: what a person can get wrong is refused with what to
fix.  The offer itself, through the app against a real server, is in
tests/browser/sharing.test.mjs."""
from __future__ import annotations

import pytest

from ownmem.vault.sharing import ShareRefused
from ownmem.web.shares import EXPIRY_CHOICES, offer_request

HOLDER = "ab4f746fd1520d2736854559d6751969ae9127f5dbc607d7298acbf1afb1f588"
MEM = "0123456789abcdef0123456789abcdef"


def test_a_well_formed_offer_is_taken_as_typed_or_pasted() -> None:
    r = offer_request([MEM, MEM.upper(), " "], f"  0x{HOLDER.upper()}\n", "Temporary", None)
    assert r.grantee == bytes.fromhex(HOLDER)
    assert r.memories == (MEM,)          # duplicates and blanks dropped
    assert (r.mode, r.expires_in) == ("temporary", 86400)     # the CLI's default: 24 h
    assert offer_request([MEM], HOLDER, "permanent", None).expires_in == 0
    assert offer_request([MEM], HOLDER, "syndicate", 7 * 86400).expires_in == 7 * 86400


@pytest.mark.parametrize("holder", ["", HOLDER[:-1], HOLDER + "0", "g" + HOLDER[1:], f"https://x/#share-with={HOLDER}"])
def test_a_malformed_holder_id_is_refused_before_anything_else(holder: str) -> None:
    with pytest.raises(ShareRefused, match="holderId is 64 hex digits"):
        offer_request([], holder, "nonsense", 5)


def test_no_memory_chosen_is_refused() -> None:
    with pytest.raises(ShareRefused, match="choose at least one memory"):
        offer_request(["", "  "], HOLDER, "permanent", None)


@pytest.mark.parametrize(("mode", "span"), [("temporary", 0), ("temporary", 2 * 86400), ("permanent", 3600),
                                            ("syndicate", 12345), ("forever", 0)])
def test_a_length_of_time_the_mode_does_not_allow_is_refused(mode: str, span: int) -> None:
    with pytest.raises(ShareRefused):
        offer_request([MEM], HOLDER, mode, span)


def test_every_choice_is_within_saihms_bounds() -> None:
    assert max(EXPIRY_CHOICES["temporary"]) <= 86400 and 0 not in EXPIRY_CHOICES["temporary"]
    assert EXPIRY_CHOICES["permanent"] == (0,)
