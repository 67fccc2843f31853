"""Where the tests find their normative data: tests/vectors, copied unchanged from the published
specs (its README and SHA256SUMS), so a clone with nothing beside it passes its tests."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors"
SAIHM_EXAMPLE = VECTORS / "saihm" / "example-values.json"
