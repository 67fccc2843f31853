"""The blind server imports nothing that can decrypt (DESIGN.md "Layout": boundaries that tests
enforce): only CBOR and public-key signature verification.  Checked in a fresh interpreter,
after importing the app, building it, and serving a request, so no lazy import slips by."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CAN_DECRYPT = [
    "ownmem.crypto.cpython",          # the provider: AES-GCM, AES-KW, X25519, Argon2id, signing
    "ownmem.aperto.seal",             # opening sealed objects
    "ownmem.aperto.keys",             # key derivation and unwrapping
    "ownmem.vault",                   # the unlocked vault
    "ownmem.crypto.cose",             # COSE_Encrypt0
    "argon2",                         # passphrase -> master secret
    "cryptography.hazmat.primitives.ciphers.aead",
    "cryptography.hazmat.primitives.keywrap",
    "cryptography.hazmat.primitives.asymmetric.x25519",
    "cryptography.hazmat.primitives.kdf.hkdf",
]

PROBE = r"""
import json, sys, warnings
import server.app
after_import = sorted(sys.modules)
warnings.simplefilter("ignore")     # starlette's TestClient warns about httpx; not what is tested here
from starlette.testclient import TestClient
app = server.app.create_app(server.app.Config(data_dir=sys.argv[1]))
with TestClient(app) as c:
    assert c.get("/health").status_code == 200
    assert c.get("/openapi.json").status_code == 200
    assert c.get("/v1/log").status_code == 200
    assert c.post("/v1/vaults", json={}).status_code == 400
print(json.dumps({"after_import": after_import, "after_serving": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The modules loaded by a fresh interpreter: after ``import server.app``, and after serving."""
    tmp_path = tmp_path_factory.mktemp("boundary")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "py")])
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    modules: dict[str, list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return modules


def test_server_imports_nothing_that_decrypts(modules: dict[str, list[str]]) -> None:
    for stage in ("after_import", "after_serving"):
        loaded = set(modules[stage])
        assert "server.app" in loaded
        found = [m for m in CAN_DECRYPT if m in loaded or any(x.startswith(m + ".") for x in loaded)]
        assert not found, f"{stage}: the blind server loaded code that can decrypt: {found}"


def test_server_verifies_with_public_keys_only(modules: dict[str, list[str]]) -> None:
    """What it does load for verification: Ed25519 and ML-DSA-65 public keys, CBOR, and the
    structure code it shares with the client (one definition of each rule, no copy)."""
    loaded = set(modules["after_import"])
    assert {"cryptography.hazmat.primitives.asymmetric.ed25519", "cryptography.hazmat.primitives.asymmetric.mldsa",
            "ownmem.crypto.cbor", *SHARED_WITH_CLIENT} <= loaded


# What the blind server imports from the client's package on purpose: the sealed-object
# envelope parser, the cell checks and the receipt rules.
SHARED_WITH_CLIENT = ["ownmem.aperto.envelope", "ownmem.saihm.cell", "ownmem.saihm.receipt"]


@pytest.mark.parametrize("module", SHARED_WITH_CLIENT)
def test_shared_module_alone_imports_nothing_that_decrypts(module: str) -> None:
    """Each shared module, imported alone in a fresh interpreter, loads nothing that can decrypt,
    whatever the server happens to import beside it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWNMEM_")}
    env["PYTHONPATH"] = str(ROOT / "py")
    probe = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    found = [m for m in CAN_DECRYPT if m in loaded or any(x.startswith(m + ".") for x in loaded)]
    assert not found, f"{module} loads code that can decrypt: {found}"
