"""The normative data in tests/vectors is the data as published, byte for byte (its README)."""
from __future__ import annotations

import hashlib
import json

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
        assert hashlib.sha256((VECTORS / name).read_bytes()).hexdigest() == digest, \
            f"{name} differs from the published bytes"


def test_saihm_example_values_are_the_spec_text_s() -> None:
    """The SAIHM "Example values" the tests read as data (saihm/example-values.json) are the spec's:
    each hex value occurs in the spec text's "Example values" paragraph, where long values are
    printed in 64-character groups separated by a space."""
    values = json.loads((VECTORS / "saihm" / "example-values.json").read_text())
    text = (VECTORS / "specs" / "saihm-custodial.txt").read_text()
    para = next(line for line in text.splitlines() if line.startswith("Example values"))
    for name, value in values.items():
        if name == "source":
            continue
        if isinstance(value, int):
            assert f"{name} = {value}" in para, name
            continue
        grouped = " ".join(value[i:i + 64] for i in range(0, len(value), 64))
        assert grouped in para, f"{name} is not the spec's value"
    assert len(bytes.fromhex(values["identityKey"])) == 64 and len(bytes.fromhex(values["holderSeed"])) == 32
