"""Shared fixtures: the normative vectors are read from tests/vectors (ownmem_testpaths)."""
from __future__ import annotations

import json
from typing import Any

import pytest

from tests.ownmem_testpaths import ROOT, VECTORS  # noqa: F401 - re-exported for fixtures


def load_v2_vectors() -> dict[str, Any]:
    path = VECTORS / "apertomemory-v2" / "apertomemory-v2-test-vectors.json"
    vectors: dict[str, Any] = json.loads(path.read_text())["vectors"]
    return vectors


@pytest.fixture(scope="session")
def v2_vectors() -> dict[str, Any]:
    return load_v2_vectors()
