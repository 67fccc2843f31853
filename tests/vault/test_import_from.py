"""Importing memory from ChatGPT, Claude and Gemini (ownmem.usecases.import_from), against a real
vault on disk: each source's sample file (made here, in the shapes docs/decisions.md "Importing
from ChatGPT, Claude and Gemini" describes), the memories sealed as the person's with their
provenance, duplicates skipped, and every refused file refused whole with nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownmem.aperto.model import Trust
from ownmem.errors import StoreError
from ownmem.usecases import import_from as imf
from ownmem.usecases.import_from import ImportFromRefused
from ownmem.vault import UnlockedVault
from ownmem.vault.store import Store, StoredObject
from tests.vault.vaultkit import folder_of, store_state, vault  # noqa: F401 - fixture

NOW = 1_800_000_000

# ChatGPT's data export: memory.json, a list of objects with content, enabled and a time
CHATGPT_JSON = json.dumps([
    {"id": "m1", "content": "Prefers metric units", "enabled": True, "created_at": "2025-03-01T10:00:00Z"},
    {"id": "m2", "content": "Is learning Portuguese", "enabled": True, "created_at": 1735689600},
    {"id": "m3", "content": "Has a dog named Pixel", "enabled": False, "created_at": "2025-01-05T08:00:00Z"},
]).encode()

# ChatGPT's "Manage memories" list, pasted: one per line, some as bullets
CHATGPT_PASTE = "Prefers metric units\n\n• Works as a nurse in Porto\n- Allergic to penicillin\n".encode()

# Claude's memory export: Markdown with headings, bullets, a code fence, dated entries
CLAUDE_MD = b"""# Memory

**Work context**

- Maintains a Rust crate for CBOR
- Prefers answers without emoji

Instructions:
```
[2025-02-10] - Always show the command before the output
```
"""

# Gemini's Saved info from Takeout: an HTML page with the list
GEMINI_HTML = b"""<!DOCTYPE html><html><head><title>Saved info</title>
<style>li { color: red }</style><script>var x = "<li>not a memory</li>";</script></head>
<body><h1>Saved info</h1>
<ul>
  <li>Vegetarian &amp; cooks at home</li>
  <li>Lives in
      Montr&eacute;al</li>
  <li>Plays the cello<li>Runs on Sundays
</ul></body></html>"""


def _import(v: UnlockedVault, source: imf.Source, data: bytes) -> tuple[imf.Plan, list[bytes]]:
    p = imf.prepare(source, data, v.open_all())
    return p, imf.write(v, p, now=NOW)


def _heads(v: UnlockedVault) -> dict[str, tuple[str, ...]]:
    return {e.opened.content: e.opened.tags for e in v.open_all().heads()}


# ------------------------------------------------------------------ each source

def test_chatgpt_memory_json_is_imported_as_the_persons_with_its_provenance(vault: UnlockedVault) -> None:
    p, ids = _import(vault, "chatgpt", CHATGPT_JSON)
    assert len(ids) == 2 and p.shape == "json"
    assert [(s.where, s.why) for s in p.skipped] == [("item 3", "turned off in ChatGPT")]
    by_text = {e.opened.content: e for e in vault.open_all().heads()}
    assert set(by_text) == {"Prefers metric units", "Is learning Portuguese"}
    for e in by_text.values():
        o = e.opened
        assert o.trust is Trust.SELF and o.signature_verified       # the person's, like `ownmem add`
        assert o.tags == ("imported:chatgpt",)
        assert o.tool == "ownmem/0.1 import-from:chatgpt"           # provenance key 1 names the source
    assert by_text["Prefers metric units"].opened.created == 1740823200      # the time the export gives
    assert by_text["Is learning Portuguese"].opened.created == 1735689600


def test_chatgpt_pasted_list_one_memory_per_line_or_bullet(vault: UnlockedVault) -> None:
    p, ids = _import(vault, "chatgpt", CHATGPT_PASTE)
    assert p.shape == "text" and len(ids) == 3
    assert _heads(vault) == {t: ("imported:chatgpt",) for t in
                             ("Prefers metric units", "Works as a nurse in Porto", "Allergic to penicillin")}
    assert all(e.opened.created == NOW for e in vault.open_all().heads())


def test_claude_markdown_headings_and_fences_are_structure_not_memories(vault: UnlockedVault) -> None:
    p, ids = _import(vault, "claude", CLAUDE_MD)
    assert [f.where for f in p.new] == ["line 5", "line 6", "line 10"]
    heads = {e.opened.content: e.opened for e in vault.open_all().heads()}
    assert set(heads) == {"Maintains a Rust crate for CBOR", "Prefers answers without emoji",
                          "Always show the command before the output"}
    assert heads["Always show the command before the output"].created == 1739145600   # its [date] prefix
    assert {o.tool for o in heads.values()} == {"ownmem/0.1 import-from:claude"}
    assert len(ids) == 3


def test_gemini_takeout_html_list_items_only(vault: UnlockedVault) -> None:
    p, ids = _import(vault, "gemini", GEMINI_HTML)
    assert p.shape == "html" and len(ids) == 4
    assert _heads(vault) == {t: ("imported:gemini",) for t in (
        "Vegetarian & cooks at home", "Lives in Montréal", "Plays the cello", "Runs on Sundays")}


@pytest.mark.parametrize("data", [
    json.dumps({"memories": ["Likes jazz", {"text": "Reads Borges"}, {"memory": "Bikes to work"}]}).encode(),
    json.dumps(["Likes jazz", {"value": "Reads Borges"}, "  ", {"content": "Bikes to work"}]).encode(),
])
def test_the_plausible_json_shapes(vault: UnlockedVault, data: bytes) -> None:
    _, ids = _import(vault, "gemini", data)
    assert len(ids) == 3
    assert set(_heads(vault)) == {"Likes jazz", "Reads Borges", "Bikes to work"}


# ------------------------------------------------------------------ duplicates

def test_duplicates_in_the_vault_and_in_the_file_are_skipped_and_counted(vault: UnlockedVault) -> None:
    vault.add("Prefers   metric\nunits")                   # the same text, other whitespace
    data = b"Prefers metric units\nLikes chess\n  Likes  chess \nLikes Chess\n"
    p, ids = _import(vault, "chatgpt", data)
    assert [(s.where, s.why) for s in p.skipped] == [("line 1", "already in the vault"),
                                                     ("line 3", "repeated (line 2)")]
    assert len(ids) == 2                                   # "Likes chess" and "Likes Chess": case is kept
    assert sorted(_heads(vault)) == ["Likes Chess", "Likes chess", "Prefers   metric\nunits"]
    again, ids2 = _import(vault, "chatgpt", data)          # importing the same file twice adds nothing
    assert ids2 == [] and len(again.skipped) == 4


# ------------------------------------------------------------------ refused files: nothing written

BIG_MEMORY = ("x" * (imf.MAX_MEMORY_BYTES + 1)).encode()

REFUSED: list[tuple[imf.Source, bytes, str, str]] = [
    ("chatgpt", json.dumps(["fine", 42]).encode(), "item 2", "not the format"),
    ("chatgpt", json.dumps([{"content": "ok"}, {"title": "no text"}]).encode(), "item 2", "not the format"),
    ("chatgpt", b'["fine", "broken', "line 1", "not JSON"),
    ("chatgpt", json.dumps({"user": "me"}).encode(), "", "without a list of memories"),
    ("chatgpt", b"[" * 40 + b"]" * 40, "", "nested deeper"),
    ("chatgpt", b'["ok", "\\ud800"]', "item 2", "lone surrogate"),
    ("claude", b"- fine\n- also fine\n- caf\xe9 latin-1\n", "line 3", "not UTF-8"),
    ("claude", b"# Memory\n\n```\n```\n", "", "no memories found"),
    ("claude", b"- fine\n" + BIG_MEMORY + b"\n", "line 2", "too long for the vault"),
    ("gemini", b"<html><body><p>Saved info</p><p>Likes tea</p></body></html>", "", "no memories found"),
    ("gemini", b"", "", "no memories found"),
    ("gemini", b"x" * (imf.MAX_FILE_BYTES + 1), "", "too large"),
]


@pytest.mark.parametrize("source, data, where, reason", REFUSED,
                         ids=[f"{s}-{r.replace(' ', '_')}" for s, _, _, r in REFUSED])
def test_a_refused_file_names_the_line_or_item_and_writes_nothing(
        vault: UnlockedVault, source: imf.Source, data: bytes, where: str, reason: str) -> None:
    vault.add("already here")
    before = store_state(folder_of(vault))
    with pytest.raises(ImportFromRefused) as e:
        _import(vault, source, data)
    assert e.value.where == where and reason in e.value.reason
    assert str(e.value).startswith("import refused, nothing written: ")
    assert e.value.code == "import_from_refused"
    assert store_state(folder_of(vault)) == before


def test_a_failure_part_way_leaves_nothing_half_done(vault: UnlockedVault, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store fails on the third memory (a full disk): the transaction is rolled back whole."""
    before = store_state(folder_of(vault))
    real = Store.put_object
    calls = [0]

    def put_object(self: Store, row: StoredObject) -> bool:
        calls[0] += 1
        if calls[0] == 3:
            raise StoreError("database or disk is full")
        return real(self, row)
    monkeypatch.setattr(Store, "put_object", put_object)
    with pytest.raises(StoreError):
        _import(vault, "chatgpt", b"one\ntwo\nthree\nfour\n")
    assert calls[0] == 3
    assert store_state(folder_of(vault)) == before


def test_a_future_time_in_the_file_is_not_believed(vault: UnlockedVault) -> None:
    _import(vault, "chatgpt", json.dumps([{"content": "from the future", "created_at": NOW + 10**6}]).encode())
    assert [e.opened.created for e in vault.open_all().heads()] == [NOW]


def test_reading_is_pure_and_needs_no_vault(tmp_path: Path) -> None:
    shape, found = imf.read("claude", b"1. one\n2) two\n- [x] three\n---\n")
    assert shape == "text" and [f.text for f in found] == ["one", "two", "three"]
    assert not list(tmp_path.iterdir())
