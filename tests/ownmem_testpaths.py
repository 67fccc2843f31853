"""Where the tests find ../shared (read in place, never copied).  A module of its own name,
because each test folder may have a conftest.py and `from conftest import` would be ambiguous."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
VECTORS = SHARED / "vectors"
