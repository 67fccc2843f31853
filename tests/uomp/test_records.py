"""Records import (uomp-draft-00 section 12): every format rule of 12.4-12.8 on the pure parser, every
12.9 refusal with nothing written, and `ownmem records import` through the real CLI and vault."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ownmem.errors import MalformedInput
from ownmem.uomp.records import (
    RecordsRefused,
    accepted,
    check,
    field_names,
    format_of,
    parse_csv,
    parse_json,
    parse_map,
    target_of,
    validate,
)
from tests.sync.synckit import cli_env, ownmem

SPEC_CSV = b"key,tags,sensitivity,value.title,value.content\nnote-1,notes,low,Shopping list,Buy milk\n" \
           b"contact-1,contacts,medium,Alice,alice@example.com\n"
SPEC_JSON = json.dumps([
    {"key": "note-1", "tags": ["notes"], "sensitivity": "low",
     "value": {"title": "Shopping list", "content": "Buy milk"}},
    {"key": "contact-1", "tags": ["contacts"], "sensitivity": "medium",
     "value": {"name": "Alice", "email": "alice@example.com"}},
]).encode()


def test_the_spec_examples_parse_to_the_same_items() -> None:
    c = validate(parse_csv(SPEC_CSV))
    j = validate(parse_json(SPEC_JSON))
    assert [(r.key, r.tags, r.sensitivity) for r in c] == [("note-1", ("notes",), "low"),
                                                          ("contact-1", ("contacts",), "medium")]
    assert c[0].value == j[0].value == {"title": "Shopping list", "content": "Buy milk"}
    assert c[0].extension() == {"key": "note-1", "value": c[0].value, "sensitivity": "low", "source": "user"}


def test_aliases_nesting_quoting_bom_and_empty_lines() -> None:
    data = ("\ufeffid,tag,level,desc,created,value.a.b,value.a.c,plain\n\n"
            '"k,1","x;y",high,"said ""hi""",2026-07-01T10:00:00Z,1,2,p\n\n').encode()
    (r,) = validate(parse_csv(data))
    assert r.key == "k,1" and r.tags == ("x", "y") and r.sensitivity == "high"
    assert r.description == 'said "hi"' and r.created_at == "2026-07-01T10:00:00Z"
    assert r.value == {"a": {"b": "1", "c": "2"}, "plain": "p"}


def test_json_single_object_and_value_from_non_reserved_fields() -> None:
    (r,) = validate(parse_json(b'{"record_id": "p1", "tags": "preference", "sensitivity": "low", "theme": "dark",'
                               b' "origin": "user", "updated": "2026-07-12"}'))
    assert (r.key, r.tags, r.value, r.updated_at) == ("p1", ("preference",), {"theme": "dark"}, "2026-07-12")


def test_map_renames_before_aliases() -> None:
    m = parse_map(["名称=key", "类别=tags", "id=value.external_id"])
    (r,) = validate(parse_csv("名称,类别,sensitivity,id\nn1,notes,low,77\n".encode(), m))
    assert r.key == "n1" and r.tags == ("notes",) and r.value == {"external_id": "77"}
    with pytest.raises(MalformedInput):
        parse_map(["nonsense"])
    with pytest.raises(MalformedInput):
        parse_map(["a=password"])


def test_missing_sensitivity_refuses_or_takes_the_stated_default() -> None:
    raw = parse_csv(b"key,tags,value.x\nk1,notes,1\nk2,notes,2\n")
    with pytest.raises(RecordsRefused) as e:
        validate(raw)
    assert [n for n, _ in e.value.problems] == [1, 2] and "sensitivity is missing" in str(e.value)
    out = validate(raw, default_sensitivity="medium")
    assert all(r.sensitivity == "medium" and r.sensitivity_defaulted for r in out)


@pytest.mark.parametrize("rows, problem", [
    ("key,tags,sensitivity\n,notes,low\n", "key is missing"),
    ("key,tags,sensitivity\n  ,notes,low\n", "key is missing"),
    ("key,tags,sensitivity\nk,notes,secret\n", "not one of low, medium, high"),
    ("key,tags,sensitivity\nk,notes,LOW \n", "not one of low, medium, high"),
    ("key,tags,sensitivity\nk,,low\n", "tags is missing"),
    ("key,tags,sensitivity\nk,;;,low\n", "tags is missing"),
    ("key,tags,sensitivity,created_at\nk,n,low,yesterday\n", "created_at 'yesterday'"),
    ("key,tags,sensitivity,updated_at\nk,n,low,2026-02-30\n", "updated_at"),
    ("key,tags,sensitivity\nk,n,low\nk,m,low\n", "also record 1's"),
    ("key,tags,sensitivity,source\nk,n,low,agent\n", "source 'agent'"),
    ("key,id,tags,sensitivity\nk,j,n,low\n", "key is given twice"),
    ("key,tags,sensitivity,value.a,value.a.b\nk,n,low,1,2\n", "collides"),
    ("key,tags,sensitivity\nk,n\n", "has 2 cells"),
])
def test_every_validation_refusal(rows: str, problem: str) -> None:
    with pytest.raises(RecordsRefused) as e:
        validate(parse_csv(rows.encode()))
    assert problem in str(e.value)


def test_json_refusals() -> None:
    with pytest.raises(RecordsRefused, match="not an object"):
        validate(parse_json(b'[1]'))
    with pytest.raises(RecordsRefused, match="has a value and other"):
        validate(parse_json(b'{"key": "k", "tags": ["n"], "sensitivity": "low", "value": 1, "extra": 2}'))
    with pytest.raises(RecordsRefused, match="not JSON"):
        parse_json(b'[{"key": ')
    with pytest.raises(RecordsRefused, match="not UTF-8"):
        parse_json(b'\xff')
    with pytest.raises(RecordsRefused, match="no records"):
        validate(parse_json(b'[]'))


def test_a_key_already_in_the_vault_needs_replace() -> None:
    raw = parse_csv(b"key,tags,sensitivity\nk,n,low\n")
    with pytest.raises(RecordsRefused, match="--replace"):
        validate(raw, existing_keys=frozenset({"k"}))
    assert validate(raw, existing_keys=frozenset({"k"}), replace=True)[0].key == "k"


def test_every_problem_of_every_record_is_reported() -> None:
    with pytest.raises(RecordsRefused) as e:
        validate(parse_csv(b"key,tags,sensitivity\n,,bad\nok,n,low\nk3,,\n"))
    assert sorted(e.value.problems) == sorted([
        (1, "key is missing or empty"), (1, "sensitivity 'bad' is not one of low, medium, high"),
        (1, "tags is missing or empty"),
        (3, "sensitivity is missing (give it per record, or state one with --sensitivity)"),
        (3, "tags is missing or empty")])


# --- the PWA's preview: the same check, record by record ------------------------------------

def test_check_gives_every_record_its_own_problems_and_validate_is_check_refused() -> None:
    raw = parse_csv(b"key,tags,sensitivity,value.x\nk1,notes,low,1\nk2,,low,2\nk3,notes,,3\nold,notes,low,4\n")
    checked = check(raw, existing_keys=frozenset({"old"}))
    rows = [c.to_json() for c in checked]
    assert [r["problems"] for r in rows] == [
        [], ["tags is missing or empty"],
        ["sensitivity is missing (give it per record, or state one with --sensitivity)"],
        ["key 'old' is already in the vault (give --replace to supersede it)"]]
    assert rows[0] == {"number": 1, "key": "k1", "value": {"x": "1"}, "tags": ["notes"], "sensitivity": "low",
                       "sensitivity_defaulted": False, "action": "new", "problems": []}
    assert rows[3]["action"] == "replace" and rows[2]["sensitivity"] is None
    with pytest.raises(RecordsRefused) as e:
        accepted(checked)
    with pytest.raises(RecordsRefused) as v:
        validate(raw, existing_keys=frozenset({"old"}))
    assert e.value.problems == v.value.problems and [n for n, _ in e.value.problems] == [2, 3, 4]
    # the stated sensitivity and --replace: every record passes, the same records validate gives
    ok = check(raw[:1] + raw[2:], default_sensitivity="high", existing_keys=frozenset({"old"}), replace=True)
    assert [(c.to_json()["sensitivity"], c.to_json()["sensitivity_defaulted"], c.to_json()["action"]) for c in ok] == [
        ("low", False, "new"), ("high", True, "new"), ("low", False, "replace")]
    assert accepted(ok) == validate(raw[:1] + raw[2:], default_sensitivity="high", existing_keys=frozenset({"old"}),
                                    replace=True)
    with pytest.raises(RecordsRefused, match="no records"):
        check([])


def test_field_names_and_their_targets_as_the_parser_maps_them() -> None:
    assert field_names(b"\xef\xbb\xbfid, tag ,level,value.a.b,plain\n1,x,low,2,3\n", "csv") == [
        "id", "tag", "level", "value.a.b", "plain"]
    assert field_names(b'[{"key": 1, "theme": 2}, {"theme": 3, "origin": 4}, 5]', "json") == ["key", "theme", "origin"]
    assert field_names(b'{"record_id": "p"}', "json") == ["record_id"]
    assert field_names(b"\xff", "csv") == [] and field_names(b"[{", "json") == []
    mapping = parse_map(["plain=description", "名称=key"])
    assert [target_of(n, mapping) for n in ("id", "tag", "level", "plain", "名称", "theme", "value.a.b")] == [
        "key", "tags", "sensitivity", "description", "key", "theme", "value.a.b"]
    assert format_of("Records.CSV") == "csv" and format_of("r.json") == "json" and format_of("r") == "json"
    assert format_of("r.csv", "json") == "json"


# --- through the CLI --------------------------------------------------------------------------

@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    e = cli_env(tmp_path, tmp_path / "vault")
    assert ownmem("init", env=e).returncode == 0
    return e


def _items(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    listed = json.loads(ownmem("list", "--json", env=env).stdout)
    return {m["content"].split(":")[0]: m for m in listed}


def test_cli_import_writes_one_memory_per_record_and_replace_supersedes(tmp_path: Path, env: dict[str, str]) -> None:
    f = tmp_path / "r.csv"
    f.write_bytes(SPEC_CSV)
    r = ownmem("records", "import", str(f), env=env)
    assert r.returncode == 0, r.stderr
    items = _items(env)
    assert set(items) == {"note-1", "contact-1"}
    assert items["note-1"]["tags"] == ["notes"] and items["note-1"]["trust"] == "self"
    assert items["note-1"]["source"] == "user"
    # the same keys again: refused, nothing written
    r = ownmem("records", "import", str(f), env=env)
    assert r.returncode != 0 and "--replace" in r.stderr
    assert len(json.loads(ownmem("list", "--json", env=env).stdout)) == 2
    f.write_bytes(b"key,tags,sensitivity,value.title\nnote-1,notes,low,Groceries\n")
    r = ownmem("records", "import", str(f), "--replace", env=env)
    assert r.returncode == 0, r.stderr
    listed = json.loads(ownmem("list", "--json", env=env).stdout)
    live = [m for m in listed if m["content"].startswith("note-1")]
    assert len(live) == 1 and "Groceries" in live[0]["content"] and live[0]["supersedes"]


def test_cli_refusal_writes_nothing_and_names_every_record(tmp_path: Path, env: dict[str, str]) -> None:
    f = tmp_path / "r.json"
    f.write_bytes(json.dumps([{"key": "good", "tags": ["n"], "sensitivity": "low", "value": 1},
                              {"key": "bad", "tags": [], "sensitivity": "low", "value": 2}]).encode())
    r = ownmem("records", "import", str(f), env=env)
    assert r.returncode != 0 and "record 2: tags is missing" in r.stderr
    assert json.loads(ownmem("list", "--json", env=env).stdout) == []


def test_cli_without_a_terminal_refuses_a_missing_sensitivity_unless_stated(
        tmp_path: Path, env: dict[str, str]) -> None:
    f = tmp_path / "r.csv"
    f.write_bytes(b"key,tags,value.x\nk1,notes,1\n")
    r = ownmem("records", "import", str(f), env=env)
    assert r.returncode != 0 and "sensitivity is missing" in r.stderr
    assert json.loads(ownmem("list", "--json", env=env).stdout) == []
    r = ownmem("records", "import", str(f), "--sensitivity", "medium", env=env)
    assert r.returncode == 0 and "applied the stated sensitivity 'medium' to 1 record" in r.stderr
