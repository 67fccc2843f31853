"""The worker protocol's one typedef (web/types/protocol.d.ts) against the Python that answers it.

The page's every ``call('op', args)`` is type-checked against ``PythonOperations`` and
``WorkerOperations`` there (python3 build.py typecheck-js); the operations Python answers
are the ``op_*`` methods of ``ownmem.web.api.App`` (``_operation`` dispatches ``"op_" + op``
by name).  So the two lists must name the same operations, or a renamed, added or removed
operation would type-check on one side only.  Read with ``ast`` and a regular expression:
no Pyodide, no TypeScript.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "py" / "ownmem" / "web" / "api.py"
PROTOCOL = ROOT / "web" / "types" / "protocol.d.ts"
WORKER = ROOT / "web" / "js" / "worker.js"
PREFIX = "op_"


def python_operations() -> set[str]:
    """The operation names ownmem.web.api dispatches: App's op_* methods."""
    tree = ast.parse(API.read_text(encoding="utf-8"))
    app = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "App"), None)
    assert app is not None, f"{API.name} has no class App"
    return {n.name[len(PREFIX):] for n in app.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith(PREFIX)}


def typed_operations(interface: str) -> set[str]:
    """The keys of ``export interface <interface> { name: Op<...>; ... }`` in protocol.d.ts."""
    text = PROTOCOL.read_text(encoding="utf-8")
    m = re.search(rf"^export interface {interface} \{{\n(.*?)^\}}", text, flags=re.MULTILINE | re.DOTALL)
    assert m is not None, f"{PROTOCOL.name} has no interface {interface}"
    return set(re.findall(r"^  (\w+): Op<", m.group(1), flags=re.MULTILINE))


def test_the_dispatch_is_by_op_name() -> None:
    # what python_operations() assumes: the table is App's methods, found as "op_" + op
    assert f'getattr(_app, "{PREFIX}" + op, None)' in API.read_text(encoding="utf-8")


def test_python_operations_are_typed_once() -> None:
    python = python_operations()
    typed = typed_operations("PythonOperations")
    assert python, "App has op_* methods"
    assert not python - typed, f"operations of {API.name} missing in {PROTOCOL.name}: {sorted(python - typed)}"
    assert not typed - python, (f"operations of {PROTOCOL.name} that {API.name} does not answer: "
                                f"{sorted(typed - python)}")


def test_worker_operations_are_the_workers_own() -> None:
    own = typed_operations("WorkerOperations")
    assert own, "worker.js answers some operations itself (probe)"
    assert not own & python_operations(), "an operation is typed as the worker's own but Python answers it"
    worker = WORKER.read_text(encoding="utf-8")
    for op in own:
        # worker.js's run() answers it before it reaches Python: `if (op === "probe") {`
        assert re.search(rf'if \(op === "{op}"\) \{{[^}}]*return ', worker), f"worker.js does not answer {op}"
