#!/usr/bin/env python3
"""ownmem's one build entry point: setup | test | bench.

    python3 build.py setup          create .venv and install ownmem with its test dependencies
    python3 build.py serve          setup, then run the server with the web app on http://127.0.0.1:8000
                                    (SQLite under ./data; OWNMEM_DATABASE_URL selects PostgreSQL)
    python3 build.py test [ARGS]    setup, then run the whole test suite (ARGS go to pytest)
    python3 build.py bench [AREA]   setup, then run the benchmarks (AREA: core) and
                                    write the results to docs/benchmarks.md

Everything the project needs is installed from pyproject.toml into .venv, so the
same two commands work on a fresh machine.  Only the standard library is used here.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".ownmem-setup"


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def _inputs_digest() -> str:
    # Re-install only when what decides the environment changed.
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def setup() -> None:
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    digest = _inputs_digest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    _run([str(PY), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    _run([str(PY), "-m", "pip", "install", "--quiet", "-e", ".[test]"])
    STAMP.write_text(digest)


def test(args: list[str]) -> int:
    setup()
    env = dict(os.environ)
    return subprocess.run([str(PY), "-m", "pytest", *args], cwd=ROOT, env=env).returncode


def serve(args: list[str]) -> int:
    setup()
    print("ownmem server on http://127.0.0.1:8000 (Ctrl-C to stop)", flush=True)
    try:
        return subprocess.run([str(PY), "-m", "server", *args], cwd=ROOT).returncode
    except KeyboardInterrupt:
        return 0


def bench(args: list[str]) -> int:
    setup()
    return subprocess.run([str(PY), "-m", "benchmarks", *args], cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "setup":
        setup()
        return 0
    if cmd == "serve":
        return serve(rest)
    if cmd == "test":
        return test(rest)
    if cmd == "bench":
        return bench(rest)
    print(f"build.py: unknown command {cmd!r} (setup | serve | test | bench)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
