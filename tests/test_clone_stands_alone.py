"""A clone with nothing beside it passes the tests that read normative data (issue 20, "A clone
that stands alone"): the repository is cloned into an empty temporary folder and the vector tests
run there, against the clone's own files.  What is cloned is the committed HEAD."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ownmem_testpaths import ROOT

VECTOR_TESTS = ["tests/test_vectors_provenance.py", "tests/aperto/test_vectors.py", "tests/aperto/test_frame.py",
                "tests/crypto/test_provider.py", "tests/web/test_selftest_runner.py"]


def test_the_vector_tests_pass_in_a_clone_with_nothing_beside_it(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs on a git checkout: the clone test must run there")
        pytest.skip("not a git checkout")
    alone = tmp_path / "empty" / "ownmem"          # its parent holds nothing else: no sibling folders
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(alone)], check=True)
    assert sorted(p.name for p in alone.parent.iterdir()) == ["ownmem"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(alone / "py"), str(alone)])
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *VECTOR_TESTS],
                       cwd=alone, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "[100%]" in r.stdout and "F" not in r.stdout.replace("[", "").split("[100%]")[0]
