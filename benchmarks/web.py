"""Area `web`: the PWA in headless Chromium on this machine, against absolute targets.

    cached load, 1,000     navigation (service worker answers every file) -> unlock ->
                           the list of 1,000 memories shown                         <= 2.5 s
    unlock, 10,000         passphrase submitted -> the list of 10,000 shown, with
                           the device's verified cache (boot reported apart)         <= 4 s
    add one memory         add form submitted -> its card shown (both vaults)        <= 100 ms
    fresh browser, 10,000  a new browser profile, "Use my vault from a server":
                           navigation -> the list of 10,000 shown (pull, verify all) <= 20 s
    anchors                Bitwarden: 20-30 s for a 2,000-item vault in the browser;
                           Standard Notes: ~7 s for 2,000 notes on mobile (printed, not judged)

Python prepares, the browser measures: the bundle is built (`build.py build`) and copied
to this run's folder, one real server (`python -m server`, SQLite) serves it and the sync
API on 127.0.0.1, and the vaults are made in CPython (`Vault.create`, `add` x N, `link`,
`Syncer.sync_once`), so the server holds exactly what a device would have pushed.  Then
``web_bench.mjs`` drives Chromium (playwright-core): for each vault a fresh browser context
logs in as a new device (that run is the fresh-browser figure; the login lists the vault
once, which fills the verified cache), then new pages of that context load the app from
the service worker and unlock, and finally memories are added in the unlocked page.
Figures are performance.now() in the page (origin: navigation start); see web_bench.mjs.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ownmem.vault import Vault
from ownmem.vault.sync import link

from . import machine
from .corpus import CREATED, memories
from .report import FAIL, PASS, AreaResult, Check
from .server import ServerProcess
from .timing import clock

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "web" / "dist"
SCRIPT = Path(__file__).with_name("web_bench.mjs")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PASSPHRASE = "web bench: seven lanterns over a quiet harbour"

# the bar
CACHED_LOAD_TARGET = 2.5      # s, SW-cached load -> unlocked list of 1,000
UNLOCK_TARGET = 4.0           # s, passphrase submitted -> list of 10,000, verified cache
ADD_TARGET = 0.100            # s, add submitted -> the card shown
FRESH_TARGET = 20.0           # s, a fresh browser pulls and opens 10,000
ANCHORS = (("Bitwarden, 2,000-item vault, in the browser (users report)", "20-30 s"),
           ("Standard Notes, 2,000 notes, on mobile (users report)", "~7 s"))


@dataclass(frozen=True, slots=True)
class Sizes:
    small: int = 1_000
    large: int = 10_000
    small_unlock_reps: int = 7
    large_unlock_reps: int = 5
    large_fresh_reps: int = 2
    add_reps: int = 10
    settle_ms: int = 1_500       # quiet time after the sync settles, before an add


FULL = Sizes()
QUICK = Sizes(small=200, large=1_000, small_unlock_reps=2, large_unlock_reps=2, large_fresh_reps=1, add_reps=3,
              settle_ms=500)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _s(x: float) -> str:
    return f"{x:.3f} s"


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f} ms"


def _runs(xs: list[float], unit: str = "s") -> str:
    return ", ".join(f"{x * 1e3:.0f}" if unit == "ms" else f"{x:.2f}" for x in xs) + f" ({unit})"


def _verdict(ok: bool) -> str:
    return PASS if ok else FAIL


# ---------------------------------------------------------------- preparation

def _bundle(tmp: Path) -> Path:
    """Build web/dist from the current sources and serve a private copy of it, so that a
    rebuild by someone else during the run cannot change the files under the browser."""
    _say("building the web bundle (build.py build) ...")
    subprocess.run([sys.executable, str(ROOT / "build.py"), "build"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    web = tmp / "web"
    shutil.copytree(DIST, web)
    return web


@dataclass(frozen=True, slots=True)
class Prepared:
    key: str
    name: str
    n: int
    add_seconds: float
    sync_seconds: float


def _make_vault(tmp: Path, url: str, key: str, n: int) -> Prepared:
    """A vault of n memories made in CPython and pushed to the server as a device would.
    Memory i is created at CREATED + i, so the newest, listed first, is "[n-1] ..."."""
    name = f"bench-{key}-{os.urandom(3).hex()}"
    _say(f"vault {name}: Vault.create + add x {n:,}, link, sync ...")
    uv = Vault.create(tmp / f"vault-{key}", PASSPHRASE)
    t0 = clock()
    for i, (content, tags) in enumerate(memories(n, seed=31)):
        uv.add(content, tags=tags, now=CREATED + i)
    t1 = clock()
    with httpx.Client(timeout=300.0) as c:
        report = link(uv, url, name, client=c).sync_once()
    t2 = clock()
    uv.lock()
    if report.pushed != n:
        raise RuntimeError(f"{name}: pushed {report.pushed} of {n} memories")
    return Prepared(key, name, n, t1 - t0, t2 - t1)


def _browser(s: Sizes, url: str, vaults: list[Prepared], tmp: Path) -> dict[str, Any]:
    reps = {"small": {"freshReps": 1, "unlockReps": s.small_unlock_reps, "addReps": s.add_reps},
            "large": {"freshReps": s.large_fresh_reps, "unlockReps": s.large_unlock_reps, "addReps": s.add_reps,
                      "waitEngine": True}}
    cfg = {"origin": url, "chromium": CHROMIUM, "passphrase": PASSPHRASE, "out": str(tmp / "web-bench.json"),
           "timeout_ms": 120_000, "fresh_timeout_ms": 600_000, "settle_ms": s.settle_ms,
           "vaults": [{"key": v.key, "name": v.name, "n": v.n, "reps": reps[v.key]} for v in vaults]}
    path = tmp / "web-bench-config.json"
    path.write_text(json.dumps(cfg))
    subprocess.run(["node", str(SCRIPT), str(path)], cwd=ROOT, check=True, timeout=3600)
    return json.loads(Path(cfg["out"]).read_text())  # type: ignore[no-any-return]


# ---------------------------------------------------------------- the checks

def _col(runs: list[dict[str, Any]], k: str) -> list[float]:
    return [float(r[k]) for r in runs]


def _served(runs: list[dict[str, Any]]) -> tuple[bool, str]:
    """Every measured load was controlled by the service worker and fetched no app file from
    the network (the sync API, which the service worker never answers, is not counted)."""
    ok = all(r["controlled"] and r["network"] == 0 for r in runs)
    files = sorted({f for r in runs for f in r["networkFiles"]})
    sw = sorted({r["sw"] for r in runs})
    txt = (f"every load controlled by the service worker, {'/'.join(map(str, sw))} app files answered by it, "
           "none from the network" if ok else
           f"NOT all from the service worker: controlled {[r['controlled'] for r in runs]}, from the network: {files}")
    return ok, txt


def _cached_check(s: Sizes, d: dict[str, Any]) -> Check:
    runs, warm = d["runs"]["small_unlock"], d["runs"]["small_unlock_warmup"]
    total = _col(runs, "total")
    served, served_txt = _served(runs)
    med = _med(total)
    return Check(
        f"service-worker-cached load to an unlocked vault of {s.small:,} memories listed",
        _verdict(served and med <= CACHED_LOAD_TARGET),
        (f"A vault of {s.small:,} memories, made in CPython and pulled once by this browser profile (which listed "
         "it, so the device's verified cache exists).  Each run opens a new page of that profile: navigation "
         "start -> page and vault engine from the service worker's cache -> the unlock form (the passphrase is "
         "entered the moment the form is in the document) -> Argon2id, keys, the verified cache -> the list "
         f"shown (its summary counts {s.small:,} and its first cards are in a frame).  Median of "
         f"{len(runs)} runs after one warm-up load; passes at ≤ {CACHED_LOAD_TARGET} s with every file "
         "from the service worker."),
        (("navigation start -> list shown, median", _s(med)),
         ("of which navigation start -> unlock form shown (and the passphrase submitted), median",
          _s(_med(_col(runs, "form")))),
         ("of which passphrase submitted -> list shown, median", _s(_med(_col(runs, "submitToVisible")))),
         ("navigation start -> vault engine ready (Pyodide and the wheel loaded; meanwhile), median",
          _s(_med(_col(runs, "engine")))),
         ("runs, navigation -> list", _runs(total)),
         ("warm-up load (first after the service worker installed), navigation -> list", _s(warm[0]["total"])),
         ("cards rendered / summary", f"{runs[0]['cards']} / “{runs[0]['summary']}”"),
         ("files", served_txt),
         ("target", f"≤ {CACHED_LOAD_TARGET} s")),
        figure=_s(med), target=f"≤ {CACHED_LOAD_TARGET} s")


def _unlock_check(s: Sizes, d: dict[str, Any]) -> Check:
    runs = d["runs"]["large_unlock"]
    unlock = _col(runs, "submitToVisible")
    served, served_txt = _served(runs)
    med = _med(unlock)
    return Check(
        f"unlock of a {s.large:,}-memory vault with the verified cache",
        _verdict(served and med <= UNLOCK_TARGET),
        (f"As above, with a vault of {s.large:,} memories: a new page of the profile that pulled it, loaded from "
         "the service worker.  The unlock form shows before the vault engine is ready; here the passphrase is "
         "submitted the moment the engine is (the worker's \"ready\": Pyodide and the wheel loaded), as after "
         "a person's typing, and timed from that submission to the list shown: the store read from IndexedDB "
         "into the engine (it starts at \"ready\"), Argon2id, the keys, the verified cache decrypted, every "
         "object's trust re-derived from today's keyring, the list sent to the page and rendered.  The boot "
         f"before it is reported apart.  Median of {len(runs)} runs after one warm-up load; passes at ≤ "
         f"{UNLOCK_TARGET} s."),
        (("passphrase submitted -> list shown, median", _s(med)),
         ("runs", _runs(unlock)),
         ("boot: navigation start -> vault engine ready, median", _s(_med(_col(runs, "engine")))),
         ("navigation start -> unlock form shown, median", _s(_med(_col(runs, "form")))),
         ("navigation start -> list shown, median (not judged)", _s(_med(_col(runs, "total")))),
         ("cards rendered / summary", f"{runs[0]['cards']} / “{runs[0]['summary']}”"),
         ("files", served_txt),
         ("target", f"≤ {UNLOCK_TARGET} s")),
        figure=_s(med), target=f"≤ {UNLOCK_TARGET} s")


def _add_check(s: Sizes, d: dict[str, Any]) -> Check:
    small, large = _col(d["runs"]["small_add"], "visible"), _col(d["runs"]["large_add"], "visible")
    worst = max(_med(small), _med(large))
    return Check(
        "adding one memory until it shows",
        _verdict(worst <= ADD_TARGET),
        ("In the unlocked page of each vault: the add form's content is set and the form submitted (as Enter "
         "does); timed until the new card is in the list and a frame has been produced.  In between: sealing "
         "(Ed25519, AES-256-GCM, key wrap) in the worker, the write to IndexedDB, the list updated in the page.  "
         "Each add starts with the sync idle (nothing pending, then a quiet "
         f"{s.settle_ms / 1000:.1f} s), so it does not queue behind the sync of the previous one.  Median of "
         f"{len(small)} adds per vault after one warm-up add; passes when both medians are ≤ "
         f"{ADD_TARGET * 1e3:.0f} ms."),
        ((f"vault of {s.small:,}, median", _ms(_med(small))),
         (f"vault of {s.small:,}, runs", _runs(small, "ms")),
         (f"vault of {s.large:,}, median", _ms(_med(large))),
         (f"vault of {s.large:,}, runs", _runs(large, "ms")),
         ("target", f"≤ {ADD_TARGET * 1e3:.0f} ms on both")),
        figure=f"{_ms(_med(small))} ({s.small:,}), {_ms(_med(large))} ({s.large:,})",
        target=f"≤ {ADD_TARGET * 1e3:.0f} ms")


def _fresh_check(s: Sizes, d: dict[str, Any]) -> Check:
    runs = d["runs"]["large_fresh"]
    total = _col(runs, "total")
    med = _med(total)
    small = d["runs"]["small_fresh"]
    return Check(
        f"a fresh browser pulls and opens a {s.large:,}-memory vault from the server",
        _verdict(med <= FRESH_TARGET),
        ("A new browser context (no service worker, no HTTP cache, no IndexedDB): navigation start -> the page "
         "and the vault engine from the server (Pyodide, the wheel) -> \"Use my vault from a server\" with the "
         "server, the name and the passphrase -> Argon2id, login, the whole change feed pulled and stored in "
         "IndexedDB -> every object opened and verified (Ed25519 and AES-GCM in WebCrypto), the verified cache "
         f"written -> the list shown with its count at {s.large:,}.  Median of {len(runs)} run(s), each in its "
         f"own new context; passes at ≤ {FRESH_TARGET:.0f} s."),
        (("navigation start -> list shown, median", _s(med)),
         ("runs", _runs(total)),
         ("of which navigation start -> welcome screen (nothing cached), median", _s(_med(_col(runs, "form")))),
         ("of which login submitted -> list shown, median", _s(_med(_col(runs, "submitToVisible")))),
         (f"the same for the vault of {s.small:,} (not judged)", _s(small[0]["total"])),
         ("target", f"≤ {FRESH_TARGET:.0f} s")),
        figure=_s(med), target=f"≤ {FRESH_TARGET:.0f} s")


def _anchor_check(s: Sizes, d: dict[str, Any]) -> Check:
    fresh = _med(_col(d["runs"]["large_fresh"], "total"))
    cached = _med(_col(d["runs"]["large_unlock"], "total"))
    small = _med(_col(d["runs"]["small_unlock"], "total"))
    return Check(
        "anchors: other end-to-end encrypted apps in the browser",
        PASS,
        ("Printed for scale, not judged: what users report for two other end-to-end encrypted apps, next to "
         "ownmem's figures above, each from navigation start to the list shown.  The reports are anecdotal, "
         f"from other machines and networks, for 2,000 items; ownmem's larger vault holds {s.large:,}."),
        tuple(ANCHORS) + (
            (f"ownmem, {s.large:,} memories, a fresh browser from the server", _s(fresh)),
            (f"ownmem, {s.large:,} memories, the app cached (passphrase when the engine is ready)", _s(cached)),
            (f"ownmem, {s.small:,} memories, the app cached (passphrase when the form shows)", _s(small))),
        figure="see below", target="(informational)")


def _config_check(s: Sizes, d: dict[str, Any], vaults: list[Prepared], load: tuple[str, str], wheel: str) -> Check:
    pyodide = json.loads((ROOT / "node_modules" / "pyodide" / "package.json").read_text())["version"]
    rows = [("browser", f"Chromium {d['chromium']} (headless=new, --disable-gpu), playwright-core, viewport "
                        "1280×800, one browser process, one context per device"),
            ("vault engine", f"Pyodide {pyodide} (CPython bytecode precompiled at build), wheel {wheel}"),
            ("server", "`python -m server`, SQLite, one worker, 127.0.0.1, rate limits lifted")]
    for v in vaults:
        rows.append((f"vault of {v.n:,}", f"made by `UnlockedVault.add` in {v.add_seconds:.1f} s, linked and "
                                          f"pushed by `Syncer.sync_once` in {v.sync_seconds:.1f} s"))
    rows.append(("load average (1/5/15 min) at start / end of the browser runs", f"{load[0]} / {load[1]}"))
    return Check("configuration", PASS, "What the web area ran on, besides the machine above.", tuple(rows),
                 figure="Chromium, one server", target="(informational)")


INTRO = (
    "The web app (PWA) in headless Chromium on this machine: the real bundle (`build.py build`) served with the "
    "sync API by one `python -m server` (SQLite) on 127.0.0.1, the vault logic running under Pyodide in the "
    "page's module worker.  The vaults are made in CPython and pushed to the server; each browser figure is "
    "taken inside the page (`performance.now()`, origin: the start of the navigation) by an init script that "
    "enters the passphrase the moment the form is in the document and watches for the list, so no harness "
    "round trip is in a figure.  The page renders the first 100 cards of a list (\"Show more\" adds the next "
    "100; search and filters run over every memory), so \"list shown\" means: the summary counts every "
    "memory and the first cards are in a frame.  Absolute targets (the issue's bar); other work on this "
    "2-CPU machine (see the load average) inflates every figure.")


def run(quick: bool = False) -> AreaResult:
    s = QUICK if quick else FULL
    result = AreaResult("web", INTRO)
    tmp = Path(tempfile.mkdtemp(prefix="ownmem-bench-web-"))
    srv: ServerProcess | None = None
    try:
        web = _bundle(tmp)
        wheel = next((web / "wheels").glob("ownmem-*.whl")).name
        srv = ServerProcess("sqlite", tmp, {"OWNMEM_DATA_DIR": str(tmp / "server-data"),
                                            "OWNMEM_WEB_DIR": str(web)}, workers=1)
        srv.start()
        vaults = [_make_vault(tmp, srv.url, "small", s.small), _make_vault(tmp, srv.url, "large", s.large)]
        load_start = machine.load()
        _say(f"Chromium: {len(vaults)} vaults ...")
        try:
            d = _browser(s, srv.url, vaults, tmp)
        except BaseException:
            print(f"--- server log (tail) ---\n{srv.tail()}", file=sys.stderr)
            raise
        load_end = machine.load()
        result.checks += [_cached_check(s, d), _unlock_check(s, d), _add_check(s, d), _fresh_check(s, d),
                          _anchor_check(s, d), _config_check(s, d, vaults, (load_start, load_end), wheel)]
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return result
