"""Boundaries of DESIGN.md that the code must keep: the format code does no I/O (no
filesystem, environment, clock, network or process), and it reaches randomness only
through the provider module's ``random_bytes`` default."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "py" / "ownmem"
FORMAT_CODE = sorted([*(PKG / "aperto").glob("*.py"), PKG / "crypto" / "cbor.py", PKG / "crypto" / "cose.py",
                      *(PKG / "saihm").glob("*.py"), PKG / "syncwire.py"])
FORBIDDEN = {"os", "io", "sys", "pathlib", "time", "datetime", "random", "socket", "sqlite3", "subprocess",
             "shutil", "tempfile", "urllib", "http", "httpx", "asyncio", "logging", "secrets", "getpass"}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("path", FORMAT_CODE, ids=lambda p: str(p.relative_to(PKG)))
def test_format_code_does_no_io(path: Path) -> None:
    assert not (_imports(path) & FORBIDDEN), f"{path.name} imports {_imports(path) & FORBIDDEN}"


def test_format_code_list_is_not_empty() -> None:
    assert len(FORMAT_CODE) >= 12
