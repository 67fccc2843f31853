"""ownmem's one ranking (ownmem.recall): what a person or an agent gets back for a query."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from ownmem.recall.pages import DEFAULT_LIMIT, MAX_LIMIT, CursorError, parse_cursor
from ownmem.recall.ranking import Doc, Ranking
from ownmem.recall.words import STOP_WORDS, query_words, words
from ownmem.uomp.items import search_label

DAY = 86_400
FILLER = ["the weather is nice today", "it is what it is", "the meeting was moved to the afternoon",
          "remember that the car is in the garage", "what a day it was", "the train is late again"]


def key(n: int) -> bytes:
    return n.to_bytes(4, "big")


def vault_of(n: int, *, seed: int = 7) -> list[Doc]:
    """``n`` ordinary memories full of stop words, written a day apart, none about a cat."""
    rnd = random.Random(seed)
    return [Doc(key(i), f"{rnd.choice(FILLER)} ({i})", timestamp=i * DAY) for i in range(n)]


def test_words_drop_stop_words_stem_fold_and_join_hyphens() -> None:
    assert words("What is the cat called?") == ["cat", "call"]
    assert words("Researching adoption agencies") == ["research", "adopt", "agenc"]
    assert words("Café au lait") == ["cafe", "au", "lait"]
    assert words("our stand-up is at nine") == ["stand", "up", "standup", "nine"] or \
        words("our stand-up is at nine") == ["stand", "standup", "nine"]
    assert words("Caroline's dog") == ["carolin", "dog"]
    assert query_words("tea tea TEA") == ["tea"]
    assert query_words(" ".join(f"w{i}" for i in range(500))) == [f"w{i}" for i in range(64)]
    assert not STOP_WORDS & {"cat", "tea", "research"}


def test_a_question_full_of_stop_words_finds_the_one_memory_and_not_the_vault() -> None:
    r = Ranking()
    r.put(vault_of(300))
    r.put([Doc(key(999), "Our cat is called Miso", tags=("pets",), timestamp=50 * DAY)])
    got = r.search("what is the cat called")
    assert got == [key(999)]
    # a page is capped even when everything matches
    keys, nxt = r.page("the weather is nice today")
    assert 0 < len(keys) <= DEFAULT_LIMIT


def test_stemming_and_hyphens_find_what_exact_text_would_not() -> None:
    r = Ranking()
    r.put([Doc(key(1), "Daily stand-up at 9:30", timestamp=1),
           Doc(key(2), "She is researching adoption", timestamp=DAY)])
    assert r.search("standup") == [key(1)]
    assert r.search("stand up meeting") == [key(1)]
    assert r.search("what did she research") == [key(2)]


def test_tags_weigh_more_than_a_word_in_passing() -> None:
    r = Ranking()
    r.put([Doc(key(1), "I mentioned coffee once in a long note about the morning routine", timestamp=1),
           Doc(key(2), "Flat white, oat milk", tags=("coffee",), timestamp=10 * DAY)])
    assert r.search("coffee") == [key(2), key(1)]


def test_the_relevance_floor_drops_what_barely_matches() -> None:
    r = Ranking()
    docs = [Doc(key(i), f"note {i} about the project timeline and its budget", timestamp=i * DAY) for i in range(40)]
    docs.append(Doc(key(100), "Miso the cat likes the project room", timestamp=100 * DAY))
    r.put(docs)
    # "miso" is rare and strong; "project" is in every memory, and alone is under the floor
    assert r.search("miso project") == [key(100)]


def test_ties_go_to_higher_confidence_then_newer() -> None:
    r = Ranking()
    r.put([Doc(key(1), "likes tea", timestamp=1 * DAY, confidence=0.9),
           Doc(key(2), "likes tea", timestamp=30 * DAY, confidence=0.9),
           Doc(key(3), "likes tea", timestamp=2 * DAY, confidence=1.0)])
    assert r.search("tea") == [key(3), key(2), key(1)]


def test_a_memory_written_beside_a_strong_match_rises_above_a_lone_equal_one() -> None:
    r = Ranking()
    r.put([Doc(key(1), "Do you have pets? What is the dog called?", timestamp=100 * DAY),
           Doc(key(2), "Yes, a dog called Biscuit", timestamp=100 * DAY + 30),
           Doc(key(3), "Saw a dog at the park", timestamp=10 * DAY)])
    got = r.search("dog")
    assert got.index(key(2)) < got.index(key(3))


def test_an_empty_query_lists_newest_first_in_pages() -> None:
    r = Ranking()
    r.put(vault_of(25))
    assert r.search(None) == [key(i) for i in reversed(range(25))]
    assert r.search("   ") == r.search(None)
    seen: list[bytes] = []
    cursor = None
    for _ in range(10):
        page, cursor = r.page("", limit=10, cursor=cursor)
        seen += page
        if cursor is None:
            break
    assert seen == r.search(None)
    assert r.page(None, limit=10_000)[0] == r.search(None)[:MAX_LIMIT]
    assert len(r.page(None, limit=0)[0]) == 1


@pytest.mark.parametrize("cursor", ["10", "o", "o-1", "ox", "o1e3", "o" + "9" * 20, "o１"])
def test_a_cursor_not_handed_out_is_refused(cursor: str) -> None:
    with pytest.raises(CursorError):
        parse_cursor(cursor)


def test_a_query_with_no_word_falls_back_to_containment() -> None:
    r = Ranking()
    r.put([Doc(key(1), "a * star", timestamp=1), Doc(key(2), "plain", timestamp=2)])
    assert r.search("*") == [key(1)]
    assert r.search('"') == []


@settings(max_examples=60, deadline=None)
@given(hidden=st.lists(st.sampled_from(["tea with milk", "green tea", "tea tea tea", "milk", "coffee", "tea"]),
                       max_size=12),
       query=st.sampled_from(["tea", "milk tea", "green", "coffee milk"]))
def test_what_a_caller_may_not_see_never_moves_what_it_sees(hidden: list[str], query: str) -> None:
    """No oracle (issue 19): the order of the visible answers is the same with or without
    hidden memories beside them, so it tells nothing of them."""
    seen = [Doc(key(i), text, timestamp=i * 60) for i, text in enumerate(["tea", "milk and tea", "green tea leaves",
                                                                          "coffee, black"])]
    alone = Ranking()
    alone.put(seen)
    crowded = Ranking()
    crowded.put(seen)
    crowded.put(Doc(key(1000 + i), text, timestamp=i * 60 + 30) for i, text in enumerate(hidden))
    visible = {d.key for d in seen}
    assert crowded.search(query, visible.__contains__) == alone.search(query)


def test_a_uomp_items_key_and_description_are_searched_as_its_label() -> None:
    label = search_label({"uomp": {"key": "preference.theme", "value": "dark", "description": "UI colour scheme"}})
    assert label == "preference.theme UI colour scheme"
    assert search_label({"uomp": "not an object"}) == "" and search_label({}) == ""
    r = Ranking()
    r.put([Doc(key(1), "dark", label=label, timestamp=1), Doc(key(2), "the theme park was closed", timestamp=DAY)])
    assert r.search("theme preference") == [key(1)]
    assert r.search("colour scheme") == [key(1)]


def test_records_ordered_by_a_tie_key_ignore_when_they_were_written() -> None:
    """UOMP items: the served order comes from what is served (issue 19), never from write times."""
    names = {key(1): "pay.rate", key(2): "pay.bonus", key(3): "pay.grade"}
    orders = []
    for times in ((1, 2, 3), (3, 1, 2), (5, 5, 5), (1, 100, 100_000)):
        r = Ranking()
        r.put(Doc(k, "pay", label=names[k], timestamp=t, confidence=c)
              for (k, t, c) in zip(names, times, (0.5, 1.0, 0.8), strict=True))
        orders.append((r.search("pay", tie=names.__getitem__), r.search(None, tie=names.__getitem__)))
    assert all(o == orders[0] for o in orders)
    assert orders[0][0] == [key(2), key(3), key(1)]        # bonus, grade, rate
