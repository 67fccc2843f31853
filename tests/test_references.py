"""Every section reference in the product code names its section by title, so the pointer
survives a renumbering of the spec (house style: a docstring names the spec section by title)."""
from __future__ import annotations

import re

from tests.ownmem_testpaths import ROOT

# "§8.1" must be followed by its quoted title: §8.1 "Migration" (or 'Migration' inside a string)
BARE = re.compile(r"§\d+(?:\.\d+)*(?![\d.]*\s*[\"'])")


def test_no_section_reference_is_a_bare_number() -> None:
    bare = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
            for base in ("py/ownmem", "server") for f in sorted((ROOT / base).rglob("*.py"))
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if BARE.search(line)]
    assert bare == [], "\n".join(bare)
