"""How a session reads to the person (ownmem.uomp.usage) and the grant questions of `ownmem agent
connect` on a terminal (cli.agent.ask_grant): the tags answer (Enter is all, a comma list of the
vault's tags, a typo refused), read-only or read-write, the last use from the audit."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from ownmem.cli.agent import ask_grant
from ownmem.errors import VaultError
from ownmem.uomp.usage import KIND_WORDS, kind_words, last_use, parse_mode_answer, parse_tags_answer, tag_counts

TAGS = ["work", "health", "family"]


def test_enter_or_all_grants_every_tag() -> None:
    for answer in ("", "\n", "  ", "all", "ALL", "*"):
        assert parse_tags_answer(answer, TAGS).tags is None
        assert parse_tags_answer(answer, TAGS).problem is None


def test_a_comma_list_grants_those_tags_once_each_in_order() -> None:
    got = parse_tags_answer(" work, family ,work,\n", TAGS)
    assert got.problem is None and got.tags == ("work", "family")


def test_a_tag_no_memory_carries_is_refused_not_granted_silently() -> None:
    got = parse_tags_answer("work, wrok", TAGS)
    assert got.tags is None and got.problem is not None and "wrok" in got.problem
    assert parse_tags_answer(",,", TAGS).problem is not None


def test_read_only_or_read_write() -> None:
    assert parse_mode_answer("r") is False and parse_mode_answer("read-only") is False
    assert parse_mode_answer("W") is True and parse_mode_answer("read-write") is True
    assert parse_mode_answer("") is True                    # as `connect` without --no-write
    assert parse_mode_answer("", default=False) is False
    assert parse_mode_answer("maybe") is None


def test_tag_counts_most_used_first() -> None:
    assert tag_counts([["work"], ["work", "health"], ["health", "work"], [], ["a"]]) == [
        ("work", 3), ("health", 2), ("a", 1)]
    assert tag_counts([["x", "x"]]) == [("x", 1)]           # a memory counts once per tag


def test_kind_words() -> None:
    assert kind_words("saihm") == "Assistant on this computer (MCP)"
    assert kind_words("mcp-remote") == "Remote assistant (MCP over the internet)"
    assert kind_words(None) == kind_words("uomp") == "UOMP agent"
    assert set(KIND_WORDS) == {"saihm", "mcp-remote", "uomp"}


def test_last_use_is_the_newest_act_of_the_agent_not_its_sessions_life() -> None:
    rows = [("s1", "query", 100), ("s1", "write_staged", 130), ("s1", "revoked", 200), ("s2", "grant", 50),
            ("s2", "read", 60), ("s2", "read", 40), ("", "write_confirmed", 300), ("s3", "grant", 10),
            ("s1", "write_confirmed", 400)]
    assert last_use(rows) == {"s1": 130, "s2": 60}


def answers(*lines: str) -> tuple[list[str], Callable[[str], str]]:
    asked: list[str] = []
    it = iter(lines)

    def ask(q: str) -> str:
        asked.append(q)
        return next(it)
    return asked, ask


def test_ask_grant_defaults_to_every_tag_read_write(capsys: pytest.CaptureFixture[str]) -> None:
    asked, ask = answers("\n", "\n")
    assert ask_grant([("work", 3), ("health", 1)], ask) == (None, True)
    assert len(asked) == 2
    err = capsys.readouterr().err
    assert "work" in err and "3 memories" in err and "1 memory" in err


def test_ask_grant_asks_again_after_a_typo_and_takes_read_only() -> None:
    asked, ask = answers("wrok\n", "work\n", "x\n", "r\n")
    assert ask_grant([("work", 3)], ask) == (("work",), False)
    assert len(asked) == 4


def test_ask_grant_with_no_write_does_not_ask_it_and_gives_up_after_three_typos() -> None:
    asked, ask = answers("health\n")
    assert ask_grant([("health", 1)], ask, may_write=False) == (("health",), False)
    assert len(asked) == 1
    _, ask = answers("a\n", "b\n", "c\n")
    with pytest.raises(VaultError):
        ask_grant([("health", 1)], ask)
