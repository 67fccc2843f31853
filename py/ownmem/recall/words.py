"""The words a memory and a query are matched on: one tokeniser for every place ownmem searches
(``ownmem search``, the web app's search, ``saihm_recall``, UOMP's ``POST /v1/memory/query``).

    text --> lower case, diacritics dropped ("Café" is "cafe")
         --> words (Unicode letters and digits; a hyphenated word also counts joined:
             "stand-up" gives stand, up and standup; "Caroline's" gives caroline)
         --> stop words dropped --> each word stemmed (Snowball's English stemmer)

Stemming lets "researching" find "research"; stop words keep "what is the cat called" from
matching every memory that has "is" or "the" in it.  The stemmer is the Snowball project's own,
from the ``snowballstemmer`` package: pure Python, so the same code stems under Pyodide in the
browser and in CPython (docs/decisions.md, "One ranking for every search").  Words outside
English are still split and matched, only not stemmed usefully.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

# letters and digits, with inner hyphens or apostrophes kept so the joined form can be added
_WORD = re.compile(r"\w+(?:['\u2019\-]\w+)*", re.UNICODE)
_SPLIT = re.compile(r"['\u2019\-]")
_HYPHEN = "-"
MAX_WORDS = 64            # a query's words past this are ignored (an agent's query is data)

# The Snowball project's English stop-word list, with the question words a person asks memory
# with ("what", "when", "who": matching them only adds noise) and contraction remnants.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can cannot could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just me
more most my myself no nor not now of off on once only or other ought our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves
s t d ll m re ve don didn doesn isn wasn aren weren hasn haven hadn won wouldn shouldn couldn
""".split())


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    # imported on first use, not at module import: the web app's first screen does not search
    import snowballstemmer

    stem = snowballstemmer.stemmer("english").stemWord
    cache: dict[str, str] = {}

    def cached(word: str) -> str:
        got = cache.get(word)
        if got is None:
            if len(cache) > 200_000:     # a bound, so a hostile stream of words cannot grow it
                cache.clear()
            got = cache[word] = stem(word)
        return got
    return cached


def words(text: str, *, limit: int | None = None) -> list[str]:
    """The terms of ``text``, in order: stemmed, stop words dropped; at most ``limit`` source words."""
    stem = _stemmer()
    out: list[str] = []
    found = _WORD.findall(fold(text))
    for raw in found[:limit] if limit is not None else found:
        if raw.isalnum():               # the common case: one plain word
            if raw not in STOP_WORDS:
                out.append(stem(raw))
            continue
        parts = [p for p in _SPLIT.split(raw) if p]
        out.extend(stem(p) for p in parts if p not in STOP_WORDS)
        if len(parts) > 1 and _HYPHEN in raw:
            joined = "".join(parts)
            if joined not in STOP_WORDS:
                out.append(stem(joined))
    return out


def fold(text: str) -> str:
    """Lower case, compatibility forms unified, combining marks (accents) dropped."""
    if text.isascii():
        return text.lower()             # nothing to unify or drop: the common case, fast
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def query_words(query: str) -> list[str]:
    """The terms of a query (its first ``MAX_WORDS`` words), each once, in order."""
    return list(dict.fromkeys(words(query, limit=MAX_WORDS)))
