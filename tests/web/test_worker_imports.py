"""The web worker's Python imports with the standard library alone: the worker unpacks the
ownmem wheel into Pyodide (web/js/worker.js), none of ownmem's dependencies at start (the
stemmer's wheel only on the first search, and ownmem.recall.words imports it then: it is
blocked here too, tests/web/test_search.py checks the first query loads it).  So ownmem.web.api,
and every ownmem module it imports inside its operations, must import with each dependency of
pyproject.toml missing; a module above that line (the agent's audit journal, with cryptography)
stays behind a function-level import that says so."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
API = ROOT / "py" / "ownmem" / "web" / "api.py"

# the import names of pyproject.toml's dependencies (none of them is in the worker's Pyodide)
DEPENDENCIES = ("cryptography", "argon2", "nacl", "dilithium_py", "starlette", "uvicorn", "httptools", "httpx",
                "mcp", "psycopg", "psycopg_pool", "zxcvbn", "keyring", "jwt", "jsonschema", "rfc8785", "base58",
                "gnupg", "Crypto", "snowballstemmer")
# Pyodide-only by design: the browser's crypto provider (pyodide.ffi at its top)
PYODIDE_ONLY = {"ownmem.web.provider"}
# module -> why: a worker module that may fail here (none: every one imports)
KNOWN: dict[str, str] = {}

_PROBE = """
import importlib, importlib.abc, json, sys
BLOCKED = set(sys.argv[1].split(","))
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the worker's Pyodide)")
        return None
sys.meta_path.insert(0, Missing())
failed = {}
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
print(json.dumps(failed))
"""


def _ours(name: str) -> bool:
    return name == "ownmem" or name.startswith("ownmem.")


def worker_modules() -> list[str]:
    """ownmem.web.api and the ownmem modules it imports anywhere (its operations import lazily)."""
    names = {"ownmem.web.api"}
    for node in ast.walk(ast.parse(API.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _ours(node.module):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if _ours(a.name)}
    return sorted(names - PYODIDE_ONLY)


def failing_imports(modules: list[str]) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "py"), str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", _PROBE, ",".join(DEPENDENCIES), *modules], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    failed: dict[str, str] = json.loads(out)
    return failed


def test_the_web_workers_modules_import_without_ownmems_dependencies() -> None:
    modules = worker_modules()
    assert "ownmem.vault.sync" in modules and "ownmem.agent.audit_batches" in modules
    failed = failing_imports(modules)
    assert {m: e for m, e in failed.items() if m not in KNOWN} == {}
    assert sorted(set(KNOWN) - set(failed)) == [], "fixed: take it out of KNOWN"


def test_the_probe_sees_a_missing_dependency() -> None:
    """The agent's audit journal imports cryptography at its top: the probe reports it missing."""
    failed = failing_imports(["ownmem.agent.audit"])
    assert "cryptography" in failed["ownmem.agent.audit"]
