"""Boundaries of DESIGN.md that the code must keep: the format code does no I/O (no
filesystem, environment, clock, network or process), and it reaches randomness only
through the provider module's ``random_bytes`` default; the sealed-object envelope
parser, which the blind server shares, imports no code that can decrypt."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "py" / "ownmem"
FORMAT_CODE = sorted([*(PKG / "aperto").glob("*.py"), PKG / "crypto" / "cbor.py", PKG / "crypto" / "cose.py",
                      *(PKG / "saihm").glob("*.py"), *(PKG / "wire").glob("*.py")])
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


ENVELOPE = PKG / "aperto" / "envelope.py"
# What the envelope parser may import from ownmem: CBOR, the format's vocabulary, the errors.
STRUCTURE_ONLY = {"ownmem.crypto", "ownmem.crypto.cbor", "ownmem.aperto.model", "ownmem.errors"}


def _ownmem_imports(path: Path) -> set[str]:
    """The ownmem modules a module imports, relative imports resolved (``from ..crypto import cbor``
    is ownmem.crypto.cbor when cbor is a module)."""
    package = ["ownmem", *path.parent.relative_to(PKG).parts]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            out.add(base)
            folder = PKG.parent.joinpath(*base.split("."))
            out |= {f"{base}.{a.name}" for a in node.names if (folder / f"{a.name}.py").exists()}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ownmem"):
            out.add(node.module)
            folder = PKG.parent.joinpath(*node.module.split("."))
            out |= {f"{node.module}.{a.name}" for a in node.names if (folder / f"{a.name}.py").exists()}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("ownmem")}
    return out


def test_envelope_parser_imports_structure_code_only() -> None:
    """The blind server parses cells' sealed objects with aperto/envelope.py; it must never grow
    an import of COSE, the keys, the seal/open code or a provider (tests/server/test_boundary.py
    checks the running server as a whole)."""
    imported = _ownmem_imports(ENVELOPE)
    assert "ownmem.crypto.cbor" in imported and "ownmem.aperto.model" in imported
    assert imported <= STRUCTURE_ONLY, f"envelope.py imports {imported - STRUCTURE_ONLY}"
    assert _ownmem_imports(PKG / "aperto" / "model.py") <= STRUCTURE_ONLY
