"""docs/web.md "Worker operations" against the code that answers them.

The table is the page's contract with the vault worker, so it is checked, not trusted:
every ``op_*`` method of ``ownmem.web.api.App`` has a row and every row names one (or an
operation that web/js/worker.js answers itself, without Python); a row's args are the
method's parameters (``"name"?`` only where the parameter has a default); and where the
method returns a dict literal, the row's result names its keys.  Read with ``ast``: no
Pyodide, no import of the worker's module.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "web.md"
API = ROOT / "py" / "ownmem" / "web" / "api.py"
WORKER = ROOT / "web" / "js" / "worker.js"
SECTION = "## Worker operations"


@dataclass(frozen=True)
class Row:
    op: str
    args: str      # the first code span of the args cell, e.g. {"id", "content"?}
    result: str    # the first code span of the result cell
    text: str      # the whole result cell


@dataclass(frozen=True)
class Op:
    params: dict[str, bool]          # name -> has a default
    result_keys: frozenset[str] | None   # top-level keys of a returned dict literal, if one
    all_keys: frozenset[str]         # every string key of every dict literal it returns


def _first_code(cell: str) -> str:
    m = re.search(r"`([^`]*)`", cell)
    return m.group(1) if m else ""


def doc_rows() -> dict[str, Row]:
    text = DOC.read_text(encoding="utf-8")
    assert SECTION in text, f"{DOC.name} has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, Row] = {}
    for line in body.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(\w+)`", cells[0])
        if m is None:    # the header and its rule
            continue
        assert len(cells) == 3, f"row {line!r} does not have three cells (op, args, result)"
        assert m.group(1) not in rows, f"{m.group(1)} has two rows"
        rows[m.group(1)] = Row(m.group(1), _first_code(cells[1]), _first_code(cells[2]), cells[2])
    assert rows, f"no rows found under {SECTION!r}"
    return rows


def _dict_literals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Dict]:
    return [r.value for r in ast.walk(fn) if isinstance(r, ast.Return) and isinstance(r.value, ast.Dict)]


def _str_keys(node: ast.AST) -> set[str]:
    return {k.value for d in ast.walk(node) if isinstance(d, ast.Dict)
            for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def api_ops() -> dict[str, Op]:
    tree = ast.parse(API.read_text(encoding="utf-8"))
    app = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "App")
    ops: dict[str, Op] = {}
    for fn in app.body:
        if not (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("op_")):
            continue
        a = fn.args
        positional = a.posonlyargs + a.args
        defaulted = {p.arg for p in positional[len(positional) - len(a.defaults):]} if a.defaults else set()
        defaulted |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=False) if d is not None}
        params = {p.arg: p.arg in defaulted for p in positional + a.kwonlyargs if p.arg != "self"}
        returns = [r for r in ast.walk(fn) if isinstance(r, ast.Return)]
        only = returns[0].value if len(returns) == 1 else None
        top = frozenset(k.value for k in only.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)) \
            if isinstance(only, ast.Dict) else None
        ops[fn.name[3:]] = Op(params, top, frozenset[str]().union(*(_str_keys(d) for d in _dict_literals(fn))))
    assert ops, f"no op_* methods found in {API}"
    return ops


def worker_answers_itself(op: str) -> bool:
    # worker.js's run() answers such an op before it reaches Python: `if (op === "probe") {`
    return re.search(rf'if \(op === "{op}"\) \{{[^}}]*return ', WORKER.read_text(encoding="utf-8")) is not None


def _names(span: str) -> dict[str, bool]:
    """The quoted names of a code span such as {"id", "content"?: str} -> name: marked optional."""
    return {m.group(1): m.group(2) == "?" for m in re.finditer(r'"(\w+)"(\??)', span)}


def test_every_operation_has_a_row_and_every_row_an_operation() -> None:
    rows, ops = doc_rows(), api_ops()
    missing = sorted(set(ops) - set(rows))
    assert not missing, f"operations of {API.name} missing from {DOC.name}: {missing}"
    extra = sorted(op for op in set(rows) - set(ops) if not worker_answers_itself(op))
    assert not extra, f"rows of {DOC.name} that no op_* method (nor worker.js) answers: {extra}"


def test_a_row_the_worker_answers_says_so() -> None:
    ops = api_ops()
    for row in doc_rows().values():
        if row.op not in ops and worker_answers_itself(row.op):
            assert "worker.js" in row.text, f"{row.op}: answered by worker.js, but its row does not say so"


@pytest.mark.parametrize("op", sorted(api_ops()))
def test_row_args_are_the_parameters(op: str) -> None:
    row = doc_rows().get(op)
    if row is None:
        pytest.fail(f"{op} has no row")
    doc, params = _names(row.args), api_ops()[op].params
    assert set(doc) == set(params), f"{op}: the doc says args {sorted(doc)}, op_{op} takes {sorted(params)}"
    wrong = sorted(n for n, optional in doc.items() if optional and not params[n])
    assert not wrong, f"{op}: the doc marks {wrong} optional, but op_{op} requires them"


@pytest.mark.parametrize("op", sorted(api_ops()))
def test_row_result_names_the_returned_keys(op: str) -> None:
    row, info = doc_rows().get(op), api_ops()[op]
    if row is None:
        pytest.fail(f"{op} has no row")
    doc = set(_names(row.result))
    if info.result_keys is not None:
        missing = sorted(info.result_keys - doc)
        assert not missing, f"{op}: op_{op} returns keys the doc does not name: {missing}"
    if info.all_keys:
        stale = sorted(doc - info.all_keys)
        assert not stale, f"{op}: the doc names result keys op_{op} never returns: {stale}"
