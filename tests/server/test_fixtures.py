"""The PostgreSQL rule of the server fixtures: without PostgreSQL a developer's run skips the
postgres half with a visible reason, and a CI run fails, so CI never passes by skipping it."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ONE_PG_TEST = "tests/server/test_limits.py::test_log_bad_parameters_refused[postgres-after=abc]"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["OWNMEM_TEST_PG"] = f"postgresql://postgres@127.0.0.1:{_closed_port()}"   # nothing listens there
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", ONE_PG_TEST, "-rsE", "-p", "no:cacheprovider",
                           "-p", "no:schemathesis", "-p", "no:hypothesispytest", "-p", "no:anyio",
                           "--basetemp", str(tmp_path / "inner")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_unreachable_postgres_skips_visibly_outside_ci(tmp_path: Path) -> None:
    r = _run(tmp_path, None)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout and "PostgreSQL not reachable on 127.0.0.1:" in r.stdout, r.stdout
    assert "skipping PostgreSQL tests" in r.stdout


def test_unreachable_postgres_fails_in_ci(tmp_path: Path) -> None:
    r = _run(tmp_path, "true")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 error" in r.stdout and "CI is set" in r.stdout and "skipped" not in r.stdout, r.stdout
