"""The normative data in tests/vectors is the data as published, byte for byte (its README)."""
from __future__ import annotations

import hashlib

from tests.ownmem_testpaths import VECTORS


def test_every_vector_file_matches_its_recorded_sha256() -> None:
    recorded = {}
    for line in (VECTORS / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        recorded[name] = digest
    on_disk = {str(p.relative_to(VECTORS)) for p in VECTORS.rglob("*")
               if p.is_file() and p.name not in ("SHA256SUMS", "README.md")}
    assert on_disk == set(recorded), "a vector file was added or removed without its SHA256SUMS line"
    for name, digest in recorded.items():
        assert hashlib.sha256((VECTORS / name).read_bytes()).hexdigest() == digest, f"{name} differs from the published bytes"
