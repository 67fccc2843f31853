"""The architecture as a test: the layer order of ownmem's product code (LAYERS, written once,
here), read from every module of py/ownmem and server with ast.  An import goes down the layers
or stays inside its own package, never up and never across to another package of the same layer;
no product modules import each other in a circle; an import inside a function says why on its
line or the line above (an optional dependency, start-up time, a Pyodide-only module); and
docs/architecture.md draws the same layers.

The KNOWN_* allow-lists are empty since issue 20's branches were merged; an entry added there
needs its owner and its reason, and an entry that no longer fails fails
test_allow_lists_hold_only_live_failures, so the lists only shrink."""
from __future__ import annotations

import ast
import io
import re
import shutil
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
K = TypeVar("K")

# Bottom first.  Each layer names its packages (or modules): a module belongs to the longest
# name it equals or starts with (plus "."); `ownmem` itself, the version only, is base.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("ownmem", "ownmem.errors", "ownmem.termsafe", "ownmem.passphrase", "ownmem.scrub",
              "ownmem.purposes")),
    # search and recall's words and ranking: pure, under every layer that searches
    ("recall", ("ownmem.recall",)),
    ("crypto", ("ownmem.crypto",)),
    ("aperto", ("ownmem.aperto",)),
    ("saihm", ("ownmem.saihm",)),
    ("uomp", ("ownmem.uomp",)),
    ("wire", ("ownmem.wire",)),
    ("vault", ("ownmem.vault",)),
    ("usecases", ("ownmem.usecases",)),
    # the body deadline and header timers both servers put in front of their apps
    ("http", ("ownmem.asgi",)),
    ("services", ("ownmem.agent", "ownmem.binding", "server")),
    ("front ends", ("ownmem.web", "ownmem.mcp")),
    # the command line starts every other front end and service (`ownmem mcp`, `ownmem agent`)
    ("command line", ("ownmem.cli",)),
)

# (importer, imported) -> owner: imports that go up or across today.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}
# modules in a circle -> owner
KNOWN_CYCLES: dict[frozenset[str], str] = {}
# (module, imported) -> owner: function-level imports without a comment saying why
KNOWN_UNCOMMENTED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    source: str         # the importing module
    target: str         # the product module imported, or the first name of a module outside
    line: int
    in_function: bool
    typing_only: bool   # under `if TYPE_CHECKING:`
    commented: bool     # a comment on its line(s), or on the line above it (or above its block)


@dataclass
class Tree:
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root / "py" if path.is_relative_to(root / "py") else root)
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _comment_lines(source: str) -> set[int]:
    return {t.start[0] for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT}


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Mapping[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = set()
    for name in names:
        while name and name not in known and "." in name:
            name = name.rpartition(".")[0]
        out.add(name if name in known else name.split(".")[0])
    return out


def scan(root: Path) -> Tree:
    """Every module of root/py/ownmem and root/server, and every import in it."""
    tree = Tree()
    paths = sorted([*(root / "py" / "ownmem").rglob("*.py"), *(root / "server").rglob("*.py")])
    tree.modules = {module_name(root, p): p for p in paths}
    for module, path in tree.modules.items():
        tree.imports += module_imports(module, path, tree.modules)
    return tree


def module_imports(module: str, path: Path, known: Mapping[str, Path]) -> list[Import]:
    source = path.read_text()
    syntax = ast.parse(source)
    comments = _comment_lines(source)
    lines = source.splitlines()
    import_lines = {n for node in ast.walk(syntax) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def commented(node: ast.Import | ast.ImportFrom) -> bool:
        if any(n in comments for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)):
            return True
        # the line above it, or above the run of imports (blank lines between) it ends
        above = node.lineno - 1
        while above > 0 and (not lines[above - 1].strip() or above in import_lines):
            above -= 1
        return above > 0 and lines[above - 1].lstrip().startswith("#")

    def visit(node: ast.AST, in_function: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend(Import(module, target, child.lineno, in_function, typing_only, commented(child))
                             for target in _targets(child, module, is_package, known) if target != module)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True, typing_only)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(ast.Module(body=child.body, type_ignores=[]), in_function, True)
                visit(ast.Module(body=child.orelse, type_ignores=[]), in_function, typing_only)
            else:
                visit(child, in_function, typing_only)

    visit(syntax, False, False)
    return found


def layer_of(module: str) -> tuple[int, str] | None:
    """(layer index, package) of a product module; None for a module no layer names."""
    best: tuple[int, str] | None = None
    for i, (_, units) in enumerate(LAYERS):
        for unit in units:
            if (module == unit or module.startswith(unit + ".") and unit != "ownmem") and \
                    (best is None or len(unit) > len(best[1])):
                best = (i, unit)
    return best


def unplaced(tree: Tree) -> list[str]:
    return sorted(m for m in tree.modules if layer_of(m) is None)


def wrong_way(tree: Tree) -> dict[tuple[str, str], str]:
    """(importer, imported) -> "up" | "across" for every import that leaves its package other
    than downwards (typing-only imports too: a type is a dependency)."""
    out = {}
    for imp in tree.imports:
        src, dst = layer_of(imp.source), layer_of(imp.target)
        if src is None or dst is None or src[1] == dst[1]:
            continue
        if dst[0] > src[0]:
            out[(imp.source, imp.target)] = "up"
        elif dst[0] == src[0]:
            out[(imp.source, imp.target)] = "across"
    return out


def cycles(tree: Tree) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (imports at run time: at the
    top or in a function, not typing-only), by Tarjan's algorithm."""
    graph: dict[str, set[str]] = {m: set() for m in tree.modules}
    for imp in tree.imports:
        if not imp.typing_only and imp.target in graph:
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def uncommented(tree: Tree) -> set[tuple[str, str]]:
    """(module, imported) of every function-level import with no comment saying why."""
    return {(i.source, i.target) for i in tree.imports if i.in_function and not i.commented}


def _failures(found: Iterable[K], known: Mapping[K, str]) -> list[str]:
    return sorted(str(f) for f in found if f not in known)


# ------------------------------------------------------------------------------ the tree itself

_TREE = scan(ROOT)


def test_every_product_module_has_a_layer() -> None:
    assert len(_TREE.modules) > 100
    assert unplaced(_TREE) == [], "add the package to LAYERS (and docs/architecture.md)"


def test_imports_go_down_the_layers() -> None:
    found = wrong_way(_TREE)
    assert _failures(found, KNOWN_UPWARD) == [], \
        f"imports up or across the layers: {sorted((k, v) for k, v in found.items() if k not in KNOWN_UPWARD)}"


def test_no_import_cycles_among_product_modules() -> None:
    found = cycles(_TREE)
    assert _failures(found, KNOWN_CYCLES) == [], [sorted(c) for c in found if c not in KNOWN_CYCLES]


def test_function_level_imports_say_why() -> None:
    found = uncommented(_TREE)
    assert _failures(found, KNOWN_UNCOMMENTED) == [], \
        "move these imports to the top, or say why on their line or the line above (optional dependency, " \
        f"start-up time, Pyodide-only module): {_failures(found, KNOWN_UNCOMMENTED)}"


def test_allow_lists_hold_only_live_failures() -> None:
    """A fixed entry leaves its allow-list: the lists only shrink."""
    assert sorted(map(str, set(KNOWN_UPWARD) - set(wrong_way(_TREE)))) == []
    assert sorted(map(sorted, set(KNOWN_CYCLES) - set(cycles(_TREE)))) == []
    assert sorted(set(KNOWN_UNCOMMENTED) - uncommented(_TREE)) == []


# ------------------------------------------------------------------- the checks catch what they should


def _copy(tmp: Path) -> Path:
    shutil.copytree(ROOT / "py" / "ownmem", tmp / "py" / "ownmem", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "server", tmp / "server", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def test_a_deliberate_upward_import_fails(tmp_path: Path) -> None:
    """A copy of the tree where the CBOR codec imports the command line: caught, as up, and
    test_imports_go_down_the_layers would name it."""
    root = _copy(tmp_path)
    cbor = root / "py" / "ownmem" / "crypto" / "cbor.py"
    cbor.write_text(cbor.read_text() + "\nfrom ownmem.cli import common  # noqa: E402\n")
    found = wrong_way(scan(root))
    assert found.get(("ownmem.crypto.cbor", "ownmem.cli.common")) == "up"
    assert _failures(found, KNOWN_UPWARD) == [str(("ownmem.crypto.cbor", "ownmem.cli.common"))]
    assert _failures(wrong_way(_TREE), KNOWN_UPWARD) == []


def test_across_a_layer_cycles_and_silent_function_imports_fail(tmp_path: Path) -> None:
    """A synthetic tree: aperto -> saihm (up), mcp -> web (across: two front ends), two vault
    modules in a circle (one side a function-level import: a cycle all the same), and which
    function-level imports count as saying why."""
    pkg = tmp_path / "py" / "ownmem"
    for sub in ("", "aperto", "saihm", "vault", "mcp", "web"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (tmp_path / "server").mkdir()
    (pkg / "aperto" / "a.py").write_text("from ownmem.saihm import s\n")
    (pkg / "saihm" / "s.py").write_text("")
    (pkg / "mcp" / "m.py").write_text("from ownmem.web import w\n")
    (pkg / "web" / "w.py").write_text(
        "def f():\n    import json\n\n\ndef g():\n    # Pyodide-only\n    import js\n\n    import os\n"
        "    from ownmem.saihm import s  # start-up time\n")
    (pkg / "vault" / "one.py").write_text("from ownmem.vault import two\n")
    (pkg / "vault" / "two.py").write_text("def f():\n    from ownmem.vault import one  # a cycle all the same\n")
    tree = scan(tmp_path)
    assert wrong_way(tree) == {("ownmem.aperto.a", "ownmem.saihm.s"): "up",
                               ("ownmem.mcp.m", "ownmem.web.w"): "across"}
    assert cycles(tree) == [frozenset({"ownmem.vault.one", "ownmem.vault.two"})]
    # json: no comment; js: the comment above; os: below js in the same block; s: its own line
    assert uncommented(tree) == {("ownmem.web.w", "json")}


# ------------------------------------------------------------------------------ docs/architecture.md


def doc_layers(text: str) -> list[tuple[str, list[str]]]:
    """The rows of the table under "## Layers", top first: (layer, the `packages` it names)."""
    section = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and len(cells) >= 3 and not set(cells[0]) <= set("-: ") \
                and cells[0].lower() != "layer":
            rows.append((cells[0], re.findall(r"`([\w.]+)`", cells[1])))
    return rows


def test_the_architecture_doc_draws_these_layers() -> None:
    rows = doc_layers((ROOT / "docs" / "architecture.md").read_text())
    assert [name for name, _ in rows] == [name for name, _ in reversed(LAYERS)], \
        "docs/architecture.md lists other layers than LAYERS (top first there, bottom first here)"
    for (name, units), (_, named) in zip(reversed(LAYERS), rows, strict=True):
        assert sorted(named) == sorted(units), f"layer {name}: the doc names {named}, LAYERS {units}"
