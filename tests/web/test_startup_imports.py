"""The vault worker's start-up imports (py/ownmem/web/api.py): the worker imports ownmem.web.api
before its first answer, so what it imports is paid by every start.  The operations of the later
screens (import, export, receipts, the public log, shares, agents, audit, staged writes, records)
import their modules when first called: none of them is loaded by importing the api."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

# loaded by an operation of a later screen, never at start
LATER = ("ownmem.agent.published", "ownmem.agent.audit_batches", "ownmem.uomp.records", "ownmem.uomp.usage",
         "ownmem.usecases.answers", "ownmem.usecases.requests", "ownmem.usecases.records",
         "ownmem.usecases.sessions", "ownmem.usecases.staged", "ownmem.vault.sharing",
         "ownmem.web.receipts", "ownmem.web.records", "ownmem.web.shares", "ownmem.usecases.import_from")
# what the first screens need (create, unlock, list, sync): loaded at start
FIRST = ("ownmem.vault.unlock", "ownmem.vault.vault", "ownmem.vault.sync", "ownmem.web.store", "ownmem.web.cache",
         "ownmem.web.search")


def _loaded_by_import() -> set[str]:
    code = "import json, sys; import ownmem.web.api; print(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout))


def test_the_api_imports_only_what_the_first_screens_need() -> None:
    loaded = _loaded_by_import()
    assert set(FIRST) <= loaded, set(FIRST) - loaded
    assert sorted(m for m in LATER if m in loaded) == []


def test_each_later_module_is_still_imported_by_its_operation() -> None:
    """Each module moved out of the start is named by a function-level import in api.py (so
    tests/web/test_worker_imports.py still checks it imports in the worker)."""
    text = (ROOT / "py" / "ownmem" / "web" / "api.py").read_text()
    for module in LATER:
        if module in ("ownmem.usecases.import_from",):
            continue    # imported by name below its package (answers, requests: `from ownmem.usecases import ...`)
        package, _, name = module.rpartition(".")
        assert f"from {module} import" in text or f"from {package} import {name}" in text \
            or f"import {name}" in text, module
