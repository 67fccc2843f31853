"""The field rules every check stands on (SAIHM "HTTPS binding", "Result identifiers", "Client
conformance" 7 and 8): identifiers, printable strings, numbers and booleans as the binding
lets an operator send them, and the line breaks recall framing splits at."""
from __future__ import annotations

import pytest

from ownmem.binding.fields import boolean, ident, lines, number, printable, uint
from tests.mcp.mcpkit import BAD_IDS, FORBIDDEN


@pytest.mark.parametrize("good", ["a", "!", "~", "a" * 256, "d851960a5b7754c5884c96bef5d615e666c8ad006e4ceebe028c",
                                  "AB-cd_01:/?#[]@!$&'()*+,;=%"])
def test_identifier_rule_accepts_printable_ascii_of_1_to_256(good: str) -> None:
    assert ident(good) == good            # returned whole: never truncated


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_identifier_rule_rejects_every_kind_of_invalid_identifier(bad: object) -> None:
    assert ident(bad) is None


@pytest.mark.parametrize("ch", FORBIDDEN, ids=lambda c: f"U+{ord(c):04X}")
def test_printable_rejects_control_separator_and_bidi_characters(ch: str) -> None:
    assert printable(f"STANDARD{ch}tier") is None
    assert printable(ch) is None


def test_printable_rejects_lone_surrogates_bidi_marks_and_over_long_or_empty_strings() -> None:
    for bad in ["\ud800", "a\udfffb", "\u200e", "\u200f", "\u061c", "", "x" * 257, 5, None, b"STANDARD"]:
        assert printable(bad) is None
    assert printable("x" * 65, 64) is None
    assert printable("Ünïcödé 日本 🧠") == "Ünïcödé 日本 🧠"


@pytest.mark.parametrize("v,expected", [(0, 0), (7, 7), ("7", 7), ("0", 0), ("007", 7), (1747526400.0, 1747526400),
                                        ("18446744073709551615", 2 ** 64 - 1), (2 ** 70, 2 ** 70)])
def test_unsigned_numbers_accept_a_json_number_or_a_decimal_string(v: object, expected: int) -> None:
    assert uint(v) == expected


@pytest.mark.parametrize("v", [True, False, -1, "-1", "+1", " 1", "1 ", "1.5", 1.5, "1e3", "0x10", "", "١٢",
                               "9" * 41, float("nan"), float("inf"), 2.0 ** 60, None, [1], {"n": 1}])
def test_unsigned_numbers_refuse_everything_else(v: object) -> None:
    assert uint(v) is None


@pytest.mark.parametrize("v,expected", [(0.997, 0.997), ("0.997", 0.997), (1, 1.0), ("1", 1.0), ("-0.5", -0.5)])
def test_numbers_accept_a_json_number_or_a_decimal_string(v: object, expected: float) -> None:
    assert number(v) == expected


@pytest.mark.parametrize("v", [True, "1e-3", ".5", "5.", "NaN", "Infinity", float("nan"), float("inf"), "", None])
def test_numbers_refuse_everything_else(v: object) -> None:
    assert number(v) is None


@pytest.mark.parametrize("v,expected", [(True, True), (False, False), ("true", True), ("false", False),
                                        (1, True), (0, False), ("1", True), ("0", False)])
def test_booleans_accept_exactly_the_eight_spellings(v: object, expected: bool) -> None:
    assert boolean(v) is expected


@pytest.mark.parametrize("v", ["True", "FALSE", "yes", "no", "", 2, -1, 1.0, 0.0, "t", None, [], {}])
def test_booleans_refuse_every_other_value(v: object) -> None:
    assert boolean(v) is None


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"],
                         ids=["LF", "CR", "CRLF", "VT", "FF", "NEL", "LS", "PS"])
def test_plaintext_is_split_at_every_line_break_the_spec_names(brk: str) -> None:
    assert lines(f"one{brk}two{brk}") == ["one", "two", ""]
