"""The web app's search (ownmem.web.search, the worker's `search` op): ownmem's one ranking over
what the list shows, the list screen's filters, kept in step with the listing, erasure reaching
it at once, and the stemmer loaded by the first query only (the first screen does not wait for it).

The App tests run the worker's real operations in CPython on a real vault (SQLite store, the
CPython crypto provider); only the IndexedDB write of the device cache, which exists in a browser
alone, is left out."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ownmem.crypto import run_sync
from ownmem.crypto.cpython import CPythonProvider
from ownmem.errors import MalformedInput
from ownmem.recall.ranking import Doc
from ownmem.vault import Vault
from ownmem.web.api import App, DeviceCache
from ownmem.web.search import MAX_QUERY, Facets, Filters, ListedSearch

ROOT = Path(__file__).resolve().parents[2]
PASSPHRASE = "search test: four quiet lanterns by the harbour"
PLAIN = Facets((), "semantic", "default", "verified", False)


def _key(i: int) -> bytes:
    return i.to_bytes(16, "big")


def _listing(*texts: str, facets: Facets = PLAIN) -> list[tuple[Doc, Facets]]:
    return [(Doc(_key(i), t, timestamp=1_700_000_000 + i * 86_400), facets) for i, t in enumerate(texts)]


# ------------------------------------------------------------------ ListedSearch, pure

def test_a_hyphenated_word_is_found_joined() -> None:
    s = ListedSearch()
    s.listed(_listing("Daily stand-up at 9:30", "Lunch with Anna", "Standing desk ordered"))
    assert s.search("standup", Filters())[0] == _key(0)


def test_a_question_finds_the_memory_that_answers_it_first() -> None:
    s = ListedSearch()
    s.listed(_listing("She is researching adoption", "What did the research budget cover?",
                      "Daily stand-up at 9:30", "She likes hiking"))
    assert s.search("what did she research", Filters())[0] == _key(0)


def test_the_filters_are_the_list_screens() -> None:
    s = ListedSearch()
    s.listed([
        (Doc(_key(1), "coffee at nine"), Facets(("work",), "semantic", "default", "verified", False)),
        (Doc(_key(2), "coffee with Anna"), Facets(("people",), "episodic", "home", "verified", False)),
        (Doc(_key(3), "coffee, an agent noted"), Facets((), "semantic", "default", "verified", True)),
        (Doc(_key(4), "coffee, unauthenticated"), Facets((), "semantic", "default", "unverified", False)),
    ])

    def got(**f: Any) -> set[bytes]:
        return set(s.search("coffee", Filters(**f)))
    assert got() == {_key(1), _key(2), _key(3)}          # unverified ones only when shown
    assert got(include_unverified=True) == {_key(1), _key(2), _key(3), _key(4)}
    assert got(tag="work") == {_key(1)}
    assert got(type="episodic") == {_key(2)} and got(scope="home") == {_key(2)}
    assert got(trust="agent") == {_key(3)}
    assert got(trust="unverified") == set()               # hidden while not shown, as in the page
    assert got(trust="unverified", include_unverified=True) == {_key(4)}


def test_a_blank_query_lists_newest_first() -> None:
    s = ListedSearch()
    s.listed(_listing("one", "two", "three"))
    assert s.search("  ", Filters()) == [_key(2), _key(1), _key(0)]
    assert not s.built                                    # no ranking was needed for it


def test_the_ranking_follows_the_listing_without_a_rebuild() -> None:
    s = ListedSearch()
    s.listed(_listing("Daily stand-up at 9:30", "Lunch with Anna"))
    assert s.search("standup", Filters()) == [_key(0)]
    ranking = s.ranking()
    # an edit (new text under the head's id here), a memory gone and one added: as the next list says
    s.listed([(Doc(_key(0), "Weekly retro on Friday", timestamp=1), PLAIN),
              (Doc(_key(5), "Stand-up moved to 10:00", timestamp=2), PLAIN)])
    s.added(Doc(_key(6), "Anna's stand-up notes", timestamp=3), PLAIN)
    assert set(s.search("standup", Filters())) == {_key(5), _key(6)}
    assert s.search("lunch", Filters()) == [] and s.search("retro", Filters()) == [_key(0)]
    assert s.ranking() is ranking and len(ranking) == 3


def test_an_erasure_leaves_the_index_at_once() -> None:
    s = ListedSearch()
    s.listed(_listing("the secret plan", "the public plan"))
    assert len(s.search("plan", Filters())) == 2
    s.keep_only({_key(1)})
    assert s.search("secret", Filters()) == [] and s.search("plan", Filters()) == [_key(1)]
    assert _key(0) not in s.ranking()


def test_an_overlong_query_is_refused() -> None:
    with pytest.raises(MalformedInput):
        ListedSearch().search("a" * (MAX_QUERY + 1), Filters())


_LAZY = """
import json, sys
from ownmem.recall.ranking import Doc
import ownmem.web.api
from ownmem.web.search import Facets, Filters, ListedSearch
s = ListedSearch()
s.listed([(Doc(bytes(16), "Daily stand-up"), Facets((), "semantic", "default", "verified", False))])
before = "snowballstemmer" in sys.modules
s.search("", Filters())
blank = "snowballstemmer" in sys.modules
s.search("standup", Filters())
print(json.dumps([before, blank, "snowballstemmer" in sys.modules]))
"""


def test_the_stemmer_is_loaded_by_the_first_query_only() -> None:
    """The worker's modules, a listing and a blank search do not import snowballstemmer (the
    worker fetches its wheel on the first search: web/js/worker.js)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "py"), str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", _LAZY], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert json.loads(out) == [False, False, True]


# ------------------------------------------------------------------ the worker's operations

class _App(App):
    """The worker's App on a CPython vault: its IndexedDB write of the device cache is the only
    part left out (there is no IndexedDB here)."""

    async def _save_cache_async(self) -> None:
        self.cache.dirty = False


@pytest.fixture
def app(tmp_path: Path) -> Iterator[_App]:
    a = _App.__new__(_App)          # without __init__: its IndexedDB store exists only in a browser
    v = Vault.create(tmp_path / "v", PASSPHRASE, crypto=CPythonProvider())
    a.vault, a.cache, a.syncer, a._agents = v, DeviceCache(), None, None
    a.store = v._store  # type: ignore[assignment]   # the CLI's SQLite store in place of IndexedDB's
    a.listed_search = ListedSearch()
    yield a
    v.close()


def _ids(app: App, query: str, **filters: object) -> list[str]:
    ids: list[str] = app.op_search(query, **filters)["ids"]  # type: ignore[arg-type]
    return ids


def _add(app: App, content: str, **kw: object) -> str:
    oid: str = run_sync(app.op_add(content, **kw))["id"]  # type: ignore[arg-type]
    return oid


def test_the_worker_searches_what_it_listed_and_added(app: _App) -> None:
    standup = _add(app, "Daily stand-up at 9:30", tags=["work"])
    run_sync(app.op_list())
    research = _add(app, "She is researching adoption", tags=["people"])     # after the list: op_add
    _add(app, "What did she say about the budget?", type="episodic")
    assert _ids(app, "standup") == [standup]
    assert _ids(app, "what did she research")[0] == research
    assert _ids(app, "research", tag="people") == [research]
    assert _ids(app, "nothing like this") == []


def test_an_edit_and_a_forget_reach_the_search(app: _App) -> None:
    old = _add(app, "Dentist on Tuesday")
    keep = _add(app, "Dentist bill paid")
    run_sync(app.op_list())
    assert set(_ids(app, "dentist")) == {old, keep}
    new = run_sync(app.op_edit(old, content="Orthodontist on Tuesday"))["id"]
    run_sync(app.op_list())                     # the page lists again after an edit
    assert _ids(app, "dentist") == [keep] and _ids(app, "orthodontist") == [new]
    run_sync(app.op_forget(keep))              # no list yet: the erasure reaches the index at once
    assert _ids(app, "dentist") == [] and _ids(app, "bill") == []


def test_lock_drops_the_index(app: _App) -> None:
    _add(app, "Daily stand-up at 9:30")
    run_sync(app.op_list())
    assert _ids(app, "standup")
    app.op_lock()
    assert len(app.listed_search) == 0 and not app.listed_search.built
