"""UOMP draft-00 section 12 ("Memory Import Format") end to end: `ownmem records import` on one
of the person's devices, synced through the blind server, read by an agent through the running
`ownmem agent`'s Guard.  Every refused file writes nothing any agent can ever read; the imported
records are items with the stated sensitivity, a high one reachable by exact key only.  (The
parser's rules one by one: tests/uomp/test_records.py.)"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.agent.agentkit import ownmem_cli
from tests.sync.synckit import Backend, Devices, ServerProcess, cli_env
from tests.uomp.uompkit import UompVault, error_body, start

REFUSED: list[tuple[str, bytes, tuple[str, ...]]] = [
    ("r.csv", "key,tags,sensitivity,value.t\nimp.latin,imp,low,caf\xe9\n".encode("latin-1"), ()),  # 12.4 UTF-8
    ("r.csv", b"imp.nohead,imp,low\nimp.nohead2,imp,low\n", ()),                 # 12.4 no header row
    ("r.csv", b"key,tags,value.t\nimp.nosens,imp,x\n", ()),                     # 12.8 no sensitivity, no TTY
    ("r.csv", b"key,tags,sensitivity\n,imp,low\nimp.ok1,imp,low\n", ()),         # 12.9 an empty key
    ("r.csv", b"key,tags,sensitivity\nimp.dup,imp,low\nimp.dup,imp,low\n", ()),  # 12.9 a key twice
    ("r.csv", b"key,tags,sensitivity\nimp.bad,imp,secret\n", ()),                # 12.9 sensitivity
    ("r.json", json.dumps([{"key": "imp.notag", "tags": [], "sensitivity": "low", "value": 1}]).encode(), ()),
    ("r.json", json.dumps([{"key": "imp.date", "tags": ["imp"], "sensitivity": "low", "value": 1,
                            "created_at": "last tuesday"}]).encode(), ()),         # 12.9 ISO 8601
]
GOOD_CSV = b'key,tags,sensitivity,value.title,value.content\nimp.note,imp,low,"Shopping, weekly","Buy milk"\n' \
           b"imp.pin,imp,high,Card PIN,1234\n"
GOOD_JSON = json.dumps([{"id": "imp.contact", "tag": "imp", "level": "medium", "name": "Alice",
                         "email": "alice@example.com"}]).encode()
DEFAULTED = b"key,tags,value.x\nimp.defaulted,imp,7\n"


def test_imported_records_reach_the_guard_as_stated_and_refused_files_write_nothing(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any], devices: Devices, tmp_path: Path) -> None:
    agent, uv, u = start(sqlite_backend, servers, uomp_vault, agents)
    sid, tok = u.session({"tags": ["imp"], "keys": ["imp.pin"]})
    phone = devices.join(uv.vault.server_url, uv.vault.name, label="phone")
    folder = phone.folder
    assert folder is not None
    phone.v.close()
    phone.client.close()
    devices.made.remove(phone)
    env = cli_env(tmp_path, folder)
    for i, (name, data, extra) in enumerate(REFUSED):
        f = tmp_path / f"{i}-{name}"
        f.write_bytes(data)
        r = ownmem_cli("records", "import", str(f), *extra, env=env)
        assert r.returncode != 0 and r.stderr.strip(), (name, data, r.stdout)
    for name, data, extra in (("good.csv", GOOD_CSV, ()), ("good.json", GOOD_JSON, ()),
                              ("defaulted.csv", DEFAULTED, ("--sensitivity", "medium"))):
        f = tmp_path / name
        f.write_bytes(data)
        r = ownmem_cli("records", "import", str(f), *extra, env=env)
        assert r.returncode == 0, r.stderr
        if extra:                                   # 12.8 a default is told to the person
            assert "applied the stated sensitivity 'medium' to 1 record" in r.stderr
    assert ownmem_cli("sync", env=env).returncode == 0
    deadline = time.monotonic() + 20
    while u.get("/v1/memory/imp.defaulted", tok).status_code != 200:
        assert time.monotonic() < deadline, "the imported records never reached the agent service"
        time.sleep(0.2)
    # only the good files' records, every one, a tag query away (the high one excepted)
    items = {i["key"]: i for i in u.get("/v1/memory", tok, tag="imp").json()["items"]}
    assert set(items) == {"imp.note", "imp.contact", "imp.defaulted"}
    assert items["imp.note"]["value"] == {"title": "Shopping, weekly", "content": "Buy milk"}   # 12.4 quoting
    assert items["imp.note"]["sensitivity"] == "low" and items["imp.note"]["source"] == "user"
    assert items["imp.contact"]["value"] == {"name": "Alice", "email": "alice@example.com"}   # 12.5-12.7
    assert items["imp.contact"]["sensitivity"] == "medium" and items["imp.contact"]["tags"] == ["imp"]
    assert items["imp.defaulted"]["sensitivity"] == "medium"
    # the high record by its exact key only
    assert u.get("/v1/memory/imp.pin", tok).json()["value"] == {"title": "Card PIN", "content": "1234"}
    assert u.get("/v1/memory/aggregate", tok, tag="imp", op="count").json()["result"] == 3
    for k in ("imp.latin", "imp.nohead", "imp.nosens", "imp.ok1", "imp.dup", "imp.bad", "imp.notag", "imp.date"):
        error_body(u.get(f"/v1/memory/{k}", tok), 403, "ACCESS_DENIED", sid)
