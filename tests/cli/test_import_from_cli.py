"""`ownmem import-from chatgpt|claude|gemini FILE`, run for real as a subprocess of this tree's
code (``python -m ownmem.cli``): the counts it prints, the skipped memories it names, one error
line and nothing written for a refused file, and the 5,000-memory ChatGPT list (its time is in
docs/benchmarks.md "Importing from ChatGPT")."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.test_cli import PW, make_env
from tests.ownmem_testpaths import ROOT
from tests.vault.vaultkit import store_state

CMD = [sys.executable, "-m", "ownmem.cli"]


def run(*args: str, env: dict[str, str], input: bytes | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(CMD + list(args), env=env, capture_output=True, input=input.decode() if input else None,
                       text=True, timeout=300, stdin=None if input is not None else subprocess.DEVNULL)
    assert PW not in r.stdout + r.stderr and "Traceback" not in r.stdout + r.stderr, r.stderr
    return r


def vault_env(tmp_path: Path) -> dict[str, str]:
    env = make_env(tmp_path)
    env["PYTHONPATH"] = f"{ROOT / 'py'}:{ROOT}"       # this tree's ownmem, not the installed script's
    r = run("init", env=env)
    assert r.returncode == 0, r.stderr
    return env


def listed(env: dict[str, str]) -> list[dict[str, object]]:
    r = run("list", "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert isinstance(out, list)
    return out


def test_import_prints_counts_and_names_what_it_skipped(tmp_path: Path) -> None:
    env = vault_env(tmp_path)
    assert run("add", "Likes green tea", env=env).returncode == 0
    f = tmp_path / "memory.json"
    f.write_text(json.dumps([{"content": "Likes  green tea"}, {"content": "Plays go"},
                             {"content": "Plays go"}, {"content": "Old", "enabled": False}]))
    r = run("import-from", "chatgpt", str(f), env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "imported 1 memories from ChatGPT (tagged imported:chatgpt), skipped 3\n"
    assert r.stderr.splitlines() == ["skipped item 1: already in the vault: Likes  green tea",
                                     "skipped item 3: repeated (item 2): Plays go",
                                     "skipped item 4: turned off in ChatGPT: Old"]
    mems = {m["content"]: m["tags"] for m in listed(env)}
    assert mems == {"Likes green tea": [], "Plays go": ["imported:chatgpt"]}


def test_pasted_list_from_stdin_and_dry_run(tmp_path: Path) -> None:
    env = vault_env(tmp_path)
    paste = b"- Prefers short answers\n- Lives in Oslo\n"
    r = run("import-from", "claude", "-", "--dry-run", env=env, input=paste)
    assert r.returncode == 0 and "would import 2 memories from Claude" in r.stdout
    assert listed(env) == []
    r = run("import-from", "claude", "-", env=env, input=paste)
    assert r.returncode == 0 and r.stdout.startswith("imported 2 memories from Claude")
    assert sorted(str(m["content"]) for m in listed(env)) == ["Lives in Oslo", "Prefers short answers"]


def test_a_refused_file_is_one_error_line_and_nothing_written(tmp_path: Path) -> None:
    env = vault_env(tmp_path)
    assert run("add", "kept", env=env).returncode == 0
    before = store_state(Path(env["OWNMEM_VAULT"]))
    for source, data, line in [
        ("gemini", b"<ul><li>ok</li></ul>\n<li>\xff</li>", "line 2: not UTF-8 text"),
        ("chatgpt", json.dumps(["ok", ["nested"]]).encode(), "item 2: not the format: a list"),
        ("claude", b"- ok\n- " + b"y" * 300_000 + b"\n", "line 2: a memory too long for the vault"),
    ]:
        f = tmp_path / f"{source}.export"
        f.write_bytes(data)
        r = run("import-from", source, str(f), env=env)
        assert r.returncode != 0 and r.stdout == ""
        assert r.stderr.startswith(f"ownmem: import refused, nothing written: {line}"), r.stderr
        assert len(r.stderr.splitlines()) == 1
    assert store_state(Path(env["OWNMEM_VAULT"])) == before


def test_an_unknown_source_is_refused(tmp_path: Path) -> None:
    env = vault_env(tmp_path)
    f = tmp_path / "m.txt"
    f.write_text("a memory\n")
    r = run("import-from", "copilot", str(f), env=env)
    assert r.returncode != 0 and "invalid choice: 'copilot'" in r.stderr


def test_five_thousand_chatgpt_memories(tmp_path: Path) -> None:
    env = vault_env(tmp_path)
    f = tmp_path / "memories.txt"
    f.write_text("".join(f"- Memory number {i}: prefers option {i % 7}\n" for i in range(5000)))
    start = time.perf_counter()
    r = run("import-from", "chatgpt", str(f), env=env)
    took = time.perf_counter() - start
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("imported 5000 memories from ChatGPT")
    print(f"\nimport-from chatgpt, 5,000 memories: {took:.2f} s (process start and unlock included)")
    assert len(listed(env)) == 5000
    assert took < 120


def test_a_skipped_memory_from_the_file_is_printed_inert(tmp_path: Path) -> None:
    """The file is someone else's text: an OSC 52 clipboard write or a bidi override in a skipped
    memory reaches the terminal as escapes, never as controls."""
    env = vault_env(tmp_path)
    evil = "tea\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07 and \u202egnp.exe"
    f = tmp_path / "memory.json"
    f.write_text(json.dumps([evil, evil]))
    r = run("import-from", "chatgpt", str(f), env=env)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr and "\u202e" not in r.stderr
    assert r.stderr == "skipped item 2: repeated (item 1): tea\\u001b]52;c;Y3VybCBldmlsLnNofHNo\\u0007 and " \
                       "\\u202egnp.exe\n"
