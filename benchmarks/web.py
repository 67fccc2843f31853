"""Area `web`: the PWA in every browser engine on this machine, against absolute targets.

    cached load, 1,000     navigation (service worker answers every file) -> unlock ->
                           the list of 1,000 memories shown                         <= 2.0 s
    unlock, 10,000         passphrase submitted -> the list of 10,000 shown, with
                           the device's verified cache (boot reported apart)         <= 4 s
    add one memory         add form submitted -> its card shown (both vaults)        <= 100 ms
    fresh browser, 10,000  a new browser profile, "Use my vault from a server":
                           navigation -> the list of 10,000 shown (pull, verify all) <= 20 s
    search, 10,000         the worker's `search` op in the unlocked page (the list screen's
                           call; its index already built), p50 over queries        <= 150 ms
                           (the first search, which builds the index, reported apart)
    JSPI-free path         Chromium on /?jspi=0, each figure above        <= 1.3 x Chromium's with JSPI
    recall, 10,000         CPython: ownmem.recall's Ranking, RecallIndex.page (saihm_recall's)
                           and ownmem.web.search (the worker's code), p50 over queries   <= 20 ms
    anchors                Bitwarden: 20-30 s for a 2,000-item vault in the browser;
                           Standard Notes: ~7 s for 2,000 notes on mobile (printed, not judged)

each judged per engine: Chromium (JSPI; playwright-core), Chromium without JSPI (/?jspi=0),
Firefox ESR (puppeteer-core over WebDriver BiDi) and WebKit (WebKitGTK's MiniBrowser under
Xvfb over W3C WebDriver), as tests/browser/ drives them.

Python prepares, the browser measures: the bundle is built (`build.py build`) and copied
to this run's folder, one real server (`python -m server`, SQLite) serves it and the sync
API on 127.0.0.1, and the two vaults are made once per run in CPython (`Vault.create`,
`add` x N, `link`, `Syncer.sync_once`), so the server holds exactly what a device would have
pushed; every engine then uses them.  ``web_bench.mjs`` runs once per engine: for each vault
a fresh browser profile logs in as a new device (that run is the fresh-browser figure; the
login lists the vault once, which fills the verified cache), then new pages of that profile
load the app from the service worker and unlock, and finally memories are added in the
unlocked page (they are on the server before the next engine logs in, which therefore
expects them too).  Figures are performance.now() in the page (origin: navigation start);
see web_bench.mjs.  An engine that is not installed fails its targets ("not run"); the run of
an engine that goes over a bound (a load over its time) reports the bound, never a figure it
did not measure.  OWNMEM_BENCH_WEB_ENGINES=chromium,webkit runs a subset (for work on the
harness: `python -m benchmarks web --quick --out /tmp/x.md`).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ownmem.agent.recall_index import RecallEntry, RecallIndex
from ownmem.recall.ranking import Doc, Ranking
from ownmem.vault import Vault
from ownmem.vault.sync import link
from ownmem.web.search import Facets, Filters, ListedSearch

from . import machine
from .corpus import CREATED, memories
from .report import FAIL, PASS, AreaResult, Check
from .server import ServerProcess
from .timing import clock

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "web" / "dist"
SCRIPT = Path(__file__).with_name("web_bench.mjs")
PASSPHRASE = "web bench: seven lanterns over a quiet harbour"
BINARIES = {
    "chromium": os.environ.get("CHROMIUM", "/usr/bin/chromium"),
    "firefox": os.environ.get("FIREFOX", "/usr/bin/firefox-esr"),
    "webkit_driver": os.environ.get("WEBKIT_DRIVER", "/usr/bin/WebKitWebDriver"),
    "minibrowser": os.environ.get("MINIBROWSER", "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser"),
    "xvfb": os.environ.get("XVFB", "/usr/bin/Xvfb"),
}

# the bar (issue 11), in every engine
CACHED_LOAD_TARGET = 2.0      # s, SW-cached load -> unlocked list of 1,000 (issue 11; issue 23: WebKit's)
# issue 23: every engine but WebKit at 1.5 s
CACHED_LOAD_TARGETS = {"chromium": 1.5, "chromium-nojspi": 1.5, "firefox": 1.5, "webkit": CACHED_LOAD_TARGET}
FIRST_VISIT_TARGET = 12e6     # bytes over the network on a first visit, each file once (issue 23)
FAST_4G_TARGET = 6.0          # s, Chromium under Fast 4G and 4x CPU: the first usable screen (issue 23)
UNLOCK_TARGET = 4.0           # s, passphrase submitted -> list of 10,000, verified cache
ADD_TARGET = 0.100            # s, add submitted -> the card shown
FRESH_TARGET = 20.0           # s, a fresh browser pulls and opens 10,000
NOJSPI_RATIO = 1.3            # Chromium without JSPI, each figure / the same with JSPI
SEARCH_TARGET = 0.150         # s, the worker's search of the large vault, index built (issue 22)
RECALL_TARGET = 0.020         # s, CPython: a ranked recall of the large vault (issue 22)
# what a person or an agent asks of the bench corpus (benchmarks/corpus.py): single words, phrases,
# a question with stop words, a stemmed form, a word with a diacritic, one that matches nothing
SEARCH_QUERIES = ("coffee", "dark roast coffee", "what did my manager decide about the Berlin offsite",
                  "rotating API keys", "dentist appointment", "migrations to PostgreSQL", "resume feedback",
                  "vegetarian", "naive caching", "quarterly reports", "zebra")
SEARCH_REPS = 5
SLOW_FRESH_MS = 240_000       # a slow engine's fresh pull is stopped there: 12 x the target, FAIL either way
ANCHORS = (("Bitwarden, 2,000-item vault, in the browser (users report)", "20-30 s"),
           ("Standard Notes, 2,000 notes, on mobile (users report)", "~7 s"))


@dataclass(frozen=True, slots=True)
class Engine:
    key: str                   # the run's label: chromium, chromium-nojspi, firefox, webkit
    engine: str                # web_bench.mjs's driver
    title: str
    jspi: bool
    needs: tuple[str, ...]     # BINARIES keys
    note: str = ""             # how this engine's figures differ from Chromium's, if they do
    slow: bool = False         # fewer repetitions (each load takes many times Chromium's)


WEBKIT_NOTE = (
    "WebKit: W3C WebDriver has no script that runs before the page's own, so the probe is put into the new "
    "document by polling it as it loads (pageLoadStrategy \"none\").  It may land after the form shows: the "
    "passphrase then goes in when it lands, so that delay is inside the figure (runs where it happened are "
    "counted as `late`).  It cannot see the vault worker's \"ready\": for the unlock of the larger vault it "
    "sends the worker a `status` call once the form shows and submits the passphrase when that is answered, "
    "i.e. once the engine is ready and has read the store from IndexedDB, so in WebKit that store read is in "
    "the boot, not in the unlock figure.  Cached loads navigate the profile's one tab afresh (a new document, "
    "a new vault worker) rather than opening a new tab.  A new device is a new WebDriver session (a new "
    "MiniBrowser with an empty, ephemeral profile).")
ENGINES = (
    Engine("chromium", "chromium", "Chromium (JSPI)", True, ("chromium",)),
    Engine("chromium-nojspi", "chromium", "Chromium without JSPI (/?jspi=0)", False, ("chromium",),
           "Chromium opening /?jspi=0: the vault worker's path without WebAssembly JSPI (glue-sync.js), the one "
           "WebKit takes."),
    Engine("firefox", "firefox", "Firefox ESR", True, ("firefox",),
           "Firefox: a Firefox process of its own with a fresh profile directory per device (puppeteer-core "
           "over WebDriver BiDi); the probe is a preload script; cached loads open a new tab of that profile."),
    Engine("webkit", "webkit", "WebKit (MiniBrowser)", False, ("webkit_driver", "minibrowser", "xvfb"),
           WEBKIT_NOTE, slow=True),
)


@dataclass(frozen=True, slots=True)
class Sizes:
    small: int = 1_000
    large: int = 10_000
    small_unlock_reps: int = 5
    large_unlock_reps: int = 3
    large_fresh_reps: int = 1
    fast4g_reps: int = 2
    add_reps: int = 7
    search_reps: int = SEARCH_REPS
    settle_ms: int = 1_000       # quiet time after the sync settles, before an add
    timeout_ms: int = 150_000        # a cached load: the harness stops it there (a bound, reported as such)
    fresh_timeout_ms: int = 300_000  # a fresh browser's pull and open


FULL = Sizes()
QUICK = Sizes(small=100, large=400, small_unlock_reps=2, large_unlock_reps=1, large_fresh_reps=1, fast4g_reps=1,
              add_reps=2,
              search_reps=2,
              settle_ms=300, timeout_ms=120_000, fresh_timeout_ms=180_000)


def _say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _s(x: float) -> str:
    return "not measured" if math.isnan(x) else f"{x:.3f} s"


def _ms(x: float) -> str:
    return "not measured" if math.isnan(x) else f"{x * 1e3:.1f} ms"


def _mb(n: object) -> str:
    return f"{n / 1e6:.2f} MB" if isinstance(n, (int, float)) else "not read"


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


@dataclass(slots=True)
class OnServer:
    """What a vault holds on the server now: the engines before have added memories to it."""
    n: int
    first: str                 # the newest memory's text (its start), listed first
    added: list[str] = field(default_factory=list)


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


def _browser(s: Sizes, e: Engine, url: str, vaults: list[Prepared], state: dict[str, OnServer],
             tmp: Path) -> dict[str, Any]:
    """One engine's run of web_bench.mjs -> its JSON (with `error` when it stopped part way)."""
    small_reps, large_reps = ((min(2, s.small_unlock_reps), 1) if e.slow else
                              (s.small_unlock_reps, s.large_unlock_reps))
    reps = {"small": {"freshReps": 1, "unlockReps": small_reps, "addReps": s.add_reps},
            "large": {"freshReps": s.large_fresh_reps, "unlockReps": large_reps, "addReps": s.add_reps,
                      "waitEngine": True,
                      "search": {"queries": list(SEARCH_QUERIES), "reps": 2 if e.slow else s.search_reps}}}
    out = tmp / f"web-bench-{e.key}.json"
    cfg = {"engine": e.engine, "label": e.key, "jspi": e.jspi, "server": url, "passphrase": PASSPHRASE,
           "out": str(out), "timeout_ms": s.timeout_ms,
           "fresh_timeout_ms": min(s.fresh_timeout_ms, SLOW_FRESH_MS) if e.slow else s.fresh_timeout_ms,
           "settle_ms": s.settle_ms, "fast4g_reps": s.fast4g_reps if e.key == "chromium" else 0,
           **BINARIES,
           "vaults": [{"key": v.key, "name": v.name, "n": state[v.key].n, "first": state[v.key].first,
                       "reps": reps[v.key]} for v in vaults]}
    path = tmp / f"web-bench-config-{e.key}.json"
    path.write_text(json.dumps(cfg))
    out.unlink(missing_ok=True)
    try:
        proc = subprocess.run(["node", str(SCRIPT), str(path)], cwd=ROOT, timeout=3600)
        failure = f"web_bench.mjs exited with {proc.returncode}" if proc.returncode else ""
    except subprocess.TimeoutExpired:
        failure = "web_bench.mjs ran over an hour"
    d: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"runs": {}, "added": {}, "notes": []}
    if failure:
        d["error"] = f"{failure}: {d.get('error', 'no output')}"
    for key, texts in d.get("added", {}).items():
        st = state[key]
        st.n += len(texts)
        st.added += texts
        if texts:
            st.first = texts[-1]
    return d


# ---------------------------------------------------------------- the checks

def _col(runs: list[dict[str, Any]], k: str) -> list[float]:
    return [float("nan") if r.get(k) is None else float(r[k]) for r in runs]   # JSON null: NaN, not measured


def _served(runs: list[dict[str, Any]]) -> tuple[bool, str]:
    """Every measured load was controlled by the service worker and asked the server for no app
    file (the sync API, which the service worker never answers, is not counted; nor the
    browser's check for a new service worker script, which bypasses it by specification)."""
    ok = all(r["controlled"] and r["network"] == 0 for r in runs)
    files = sorted({f for r in runs for f in r["networkFiles"]})
    checks = sum(int(r["swChecks"]) for r in runs)
    txt = ("every load controlled by the service worker, no app file asked of the server" if ok else
           f"NOT all from the service worker: controlled {[r['controlled'] for r in runs]}, asked of the server: "
           f"{files}") + f" ({checks} update check(s) of /sw.js in {len(runs)} loads)"
    return ok, txt


# The app's start-up marks (web/js/client.js, docs/web.md "Start-up") worth a column, in order.
MARKS = (("worker-new", "vault worker created"), ("app", "page modules loaded"),
         ("worker", "worker modules loaded"), ("unlock-form", "unlock form"), ("argon2-start", "submitted"),
         ("pyodide", "Pyodide booted"), ("wheel-unpacked", "wheel unpacked"), ("imported", "vault modules imported"),
         ("store-read", "store read"), ("argon2-done", "Argon2id done"), ("unlock-done", "unlocked"),
         ("list-answered", "list answered"))


def _marks(runs: list[dict[str, Any]]) -> str:
    """Median of each start-up mark over the runs that have it (ms from navigation start)."""
    out = []
    for key, label in MARKS:
        at = [float(r["marks"][key]) for r in runs if key in (r.get("marks") or {})]
        if at:
            out.append((_med(at), label))
    return ", ".join(f"{label} {t:.0f}" for t, label in sorted(out)) or "none (the page sent no marks)"


def _late(runs: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    late = sum(1 for r in runs if r.get("late"))
    if not late:
        return ()
    return (("runs where the probe landed after the form showed (delay inside the figure)",
             f"{late} of {len(runs)}; probe in at {_runs(_col(runs, 'installed'))}"),)


@dataclass(frozen=True, slots=True)
class Figures:
    """One engine's judged figures (NaN where not measured)."""
    cached: float = float("nan")
    unlock: float = float("nan")
    add_small: float = float("nan")
    add_large: float = float("nan")
    fresh: float = float("nan")


def _figures(d: dict[str, Any]) -> Figures:
    r = d["runs"]
    get = lambda k, col: _med(_col(r[k], col)) if r.get(k) else float("nan")  # noqa: E731
    return Figures(get("small_unlock", "total"), get("large_unlock", "submitToVisible"), get("small_add", "visible"),
                   get("large_add", "visible"), get("large_fresh", "total"))


def _cached_check(s: Sizes, e: Engine, d: dict[str, Any], n: int) -> Check:
    runs, warm = d["runs"]["small_unlock"], d["runs"]["small_unlock_warmup"]
    total = _col(runs, "total")
    served, served_txt = _served(runs)
    med = _med(total)
    target = CACHED_LOAD_TARGETS[e.key]
    return Check(
        f"{e.title}: service-worker-cached load to an unlocked vault of {s.small:,} memories listed",
        _verdict(served and med <= target),
        (f"A vault of {n:,} memories, pulled once by this browser profile (which listed it, so the device's "
         "verified cache exists).  Each run loads the app anew in that profile: navigation start -> page and vault "
         "engine from the service worker's cache -> the unlock form (the passphrase is entered the moment the "
         "form is in the document) -> Argon2id, keys, the verified cache -> the list shown.  Median of "
         f"{len(runs)} runs after one warm-up load; passes at ≤ {target} s with every file from the "
         "service worker." + (f"  {e.note}" if e.note else "")),
        (("navigation start -> list shown, median", _s(med)),
         ("of which navigation start -> unlock form shown (and the passphrase submitted), median",
          _s(_med(_col(runs, "submit")))),
         ("of which passphrase submitted -> list shown, median", _s(_med(_col(runs, "submitToVisible")))),
         ("navigation start -> vault engine ready (Pyodide and the wheel loaded; meanwhile), median",
          _s(_med(_col(runs, "engine")))),
         ("runs, navigation -> list", _runs(total)),
         ("where the time goes: the app's start-up marks, median ms from navigation start", _marks(runs)),
         ("warm-up load (first after the service worker installed), navigation -> list", _s(warm[0]["total"])),
         ("cards rendered / summary", f"{runs[0]['cards']} / “{runs[0]['summary']}”"),
         ("files", served_txt),
         *_late(runs),
         ("target", f"≤ {target} s")),
        figure=_s(med), target=f"≤ {target} s")


def _unlock_check(s: Sizes, e: Engine, d: dict[str, Any], n: int) -> Check:
    runs = d["runs"]["large_unlock"]
    unlock = _col(runs, "submitToVisible")
    served, served_txt = _served(runs)
    med = _med(unlock)
    when = ("once a `status` call sent when the form showed is answered (the engine ready and the store read: "
            "see below)" if e.engine == "webkit" else
            "the moment the engine is (the worker's \"ready\": Pyodide and the wheel loaded), as after a "
            "person's typing")
    return Check(
        f"{e.title}: unlock of a {s.large:,}-memory vault with the verified cache",
        _verdict(served and med <= UNLOCK_TARGET),
        (f"As above, with a vault of {n:,} memories, loaded from the service worker.  The passphrase is "
         f"submitted {when}, and timed from that submission to the list shown: the store read from IndexedDB "
         "into the engine, Argon2id, the keys, the verified cache decrypted, every object's trust re-derived "
         "from today's keyring, the list sent to the page and rendered.  The boot before it is reported apart.  "
         f"Median of {len(runs)} runs after one warm-up load; passes at ≤ {UNLOCK_TARGET} s."
         + (f"  {e.note}" if e.note else "")),
        (("passphrase submitted -> list shown, median", _s(med)),
         ("runs", _runs(unlock)),
         ("boot: navigation start -> vault engine ready" + (" and the store read (the status answer)"
                                                            if e.engine == "webkit" else "") + ", median",
          _s(_med(_col(runs, "engine")))),
         ("navigation start -> passphrase submitted, median", _s(_med(_col(runs, "submit")))),
         ("navigation start -> list shown, median (not judged)", _s(_med(_col(runs, "total")))),
         ("cards rendered / summary", f"{runs[0]['cards']} / “{runs[0]['summary']}”"),
         ("the verified cache's record in IndexedDB (one AES-GCM blob, opened at every unlock: "
          + ("WebCrypto" if e.jspi else "@noble/ciphers") + ")", _mb(d["runs"].get("large_cache_bytes"))),
         ("files", served_txt),
         *_late(runs),
         ("target", f"≤ {UNLOCK_TARGET} s")),
        figure=_s(med), target=f"≤ {UNLOCK_TARGET} s")


def _add_check(s: Sizes, e: Engine, d: dict[str, Any]) -> Check:
    small, large = _col(d["runs"]["small_add"], "visible"), _col(d["runs"]["large_add"], "visible")
    worst = max(_med(small), _med(large))
    return Check(
        f"{e.title}: adding one memory until it shows",
        _verdict(worst <= ADD_TARGET),
        ("In the unlocked page of each vault: the add form's content is set and the form submitted (as Enter "
         "does); timed until the new card is in the list and a frame has been produced: sealing in the worker, "
         "the write to IndexedDB, the list updated in the page.  Each add starts with the sync idle (nothing "
         f"pending, then a quiet {s.settle_ms / 1000:.1f} s).  Median of {len(small)} adds per vault after one "
         f"warm-up add; passes when both medians are ≤ {ADD_TARGET * 1e3:.0f} ms."),
        ((f"vault of {s.small:,}, median", _ms(_med(small))),
         (f"vault of {s.small:,}, runs", _runs(small, "ms")),
         (f"vault of {s.large:,}, median", _ms(_med(large))),
         (f"vault of {s.large:,}, runs", _runs(large, "ms")),
         ("target", f"≤ {ADD_TARGET * 1e3:.0f} ms on both")),
        figure=f"{_ms(_med(small))} ({s.small:,}), {_ms(_med(large))} ({s.large:,})",
        target=f"≤ {ADD_TARGET * 1e3:.0f} ms")


def _fresh_check(s: Sizes, e: Engine, d: dict[str, Any], n: int) -> Check:
    runs = d["runs"]["large_fresh"]
    total = _col(runs, "total")
    med = _med(total)
    small = d["runs"].get("small_fresh") or [{"overTime": False, "total": float("nan")}]   # not run: VAULTS=large
    return Check(
        f"{e.title}: a fresh browser pulls and opens a {s.large:,}-memory vault from the server",
        _verdict(med <= FRESH_TARGET),
        ("A new browser profile (no service worker, no HTTP cache, no IndexedDB): navigation start -> the page "
         "and the vault engine from the server -> \"Use my vault from a server\" with the server, the name and "
         "the passphrase -> Argon2id, login, the whole change feed pulled and stored in IndexedDB -> every "
         f"object opened and verified, the verified cache written -> the list shown with its count at {n:,}.  "
         f"Median of {len(runs)} run(s), each in its own new profile; passes at ≤ {FRESH_TARGET:.0f} s."
         + (f"  {e.note}" if e.note else "")),
        (("navigation start -> list shown, median", _s(med)),
         ("runs", _runs(total)),
         ("of which navigation start -> welcome screen (nothing cached), median", _s(_med(_col(runs, "form")))),
         ("of which login submitted -> list shown, median", _s(_med(_col(runs, "submitToVisible")))),
         (f"the same for the vault of {s.small:,} (not judged)",
          f"> {small[0]['limit']:.0f} s (stopped)" if small[0].get("overTime") else _s(small[0]["total"])),
         *_late(runs),
         ("target", f"≤ {FRESH_TARGET:.0f} s")),
        figure=_s(med), target=f"≤ {FRESH_TARGET:.0f} s")


def _over_time(title: str, e: Engine, runs: list[dict[str, Any]], limit: float) -> Check:
    """A target whose run went over its time: the bound is the figure (nothing was measured past it)."""
    over = next(r for r in runs if r.get("overTime"))
    reached = ", ".join(f"{k} {float(v) / 1000:.1f} s" for k, v in over.get("marks", {}).items()) or "nothing"
    return Check(title, FAIL,
                 (f"The run was stopped when it had not shown the list after {over['limit']:.0f} s (the harness "
                  f"bounds every load), so the figure is only a bound; the steps that needed it were skipped."
                  + (f"  {e.note}" if e.note else "")),
                 (("result", f"not finished within {over['limit']:.0f} s"),
                  ("marks reached (from navigation start)", reached),
                  ("target", f"≤ {limit:g} s")),
                 figure=f"> {over['limit']:.0f} s", target=f"≤ {limit:g} s")


def _engine_checks(s: Sizes, e: Engine, d: dict[str, Any], n: dict[str, int]) -> list[Check]:
    """The four targets in one engine.  A target whose run went over its time fails with that
    bound; one whose runs are missing (the engine stopped part way, or an earlier step went over
    its time) is left out and the run's failure reported, so no figure is reported that was not
    measured."""
    out: list[Check] = []
    r = d["runs"]
    targets = (   # title, the runs judged, the bar, the check
        (f"{e.title}: service-worker-cached load to an unlocked vault of {s.small:,} memories listed",
         ("small_unlock",), CACHED_LOAD_TARGETS[e.key], lambda: _cached_check(s, e, d, n["small"])),
        (f"{e.title}: unlock of a {s.large:,}-memory vault with the verified cache",
         ("large_unlock",), UNLOCK_TARGET, lambda: _unlock_check(s, e, d, n["large"])),
        (f"{e.title}: adding one memory until it shows", ("small_add", "large_add"), ADD_TARGET,
         lambda: _add_check(s, e, d)),
        (f"{e.title}: a fresh browser pulls and opens a {s.large:,}-memory vault from the server",
         ("large_fresh",), FRESH_TARGET, lambda: _fresh_check(s, e, d, n["large"])))
    for title, judged, limit, make in targets:
        over = [x for k in judged for x in r.get(k, []) if x.get("overTime")]
        if over:
            out.append(_over_time(title, e, over, limit))
        elif all(r.get(k) for k in judged):
            out.append(make())
        else:
            notes = "; ".join(d.get("notes", [])) or "none"
            out.append(Check(title, FAIL, "Not measured in this engine: a step it needs did not complete (see "
                                          "the notes and the run's error).", (("notes", notes),),
                             figure="not measured", target=f"≤ {limit:g} s"))
    if d.get("error"):
        out.append(Check(f"{e.title}: the run completed", FAIL,
                         "The engine's run stopped part way; the targets above are those it measured before.",
                         (("error", str(d["error"])[:600]),), figure="stopped", target="completes"))
    return out


def _first_visit_check(e: Engine, d: dict[str, Any]) -> Check:
    """A fresh profile's first visit: the app's bytes over the network until its service worker
    has installed, and whether any file crossed it twice."""
    title = f"{e.title}: a first visit's bytes over the network, each file once"
    runs = d["runs"].get("small_first_visit") or d["runs"].get("large_first_visit")
    if not runs:
        return Check(title, FAIL, "Not measured in this engine: its fresh browser did not complete.",
                     (("notes", "; ".join(d.get("notes", [])) or "none"),), figure="not measured",
                     target=f"≤ {FIRST_VISIT_TARGET / 1e6:.0f} MB")
    r = runs[0]
    files = sorted(r["files"].items(), key=lambda kv: -kv[1])
    biggest = ", ".join(f"{p} {_mb(b)}" for p, b in files[:6])
    return Check(
        title, _verdict(r["bytes"] <= FIRST_VISIT_TARGET and not r["twice"]),
        ("A new browser profile opens the app and uses the vault from the server (the fresh browser above); "
         "until its service worker has installed and controls the page, the counting proxy adds up the bytes "
         "it passed on for every app file (the answers as sent: Brotli or gzip where the server has a copy "
         "and the browser accepts it; the sync API's traffic is the vault's, not the app's, and is left out), "
         "and counts the answers with a body per file.  Passes at ≤ "
         f"{FIRST_VISIT_TARGET / 1e6:.0f} MB with no file sent twice." + (f"  {e.note}" if e.note else "")),
        (("bytes over the network", _mb(r["bytes"])),
         ("app files sent", str(r["count"])),
         ("files sent more than once", ", ".join(r["twice"]) or "none"),
         ("the largest", biggest),
         ("target", f"≤ {FIRST_VISIT_TARGET / 1e6:.0f} MB, each file once")),
        figure=f"{_mb(r['bytes'])}, " + ("each file once" if not r["twice"] else f"{len(r['twice'])} sent twice"),
        target=f"≤ {FIRST_VISIT_TARGET / 1e6:.0f} MB, each once")


def _fast4g_check(d: dict[str, Any]) -> Check:
    title = "Chromium under Fast 4G and 4× CPU: the first usable screen of a first visit"
    runs = d["runs"].get("fast4g")
    if not runs:
        return Check(title, FAIL, "Not measured: the run did not reach it (see the notes and the run's error).",
                     (("notes", "; ".join(d.get("notes", [])) or "none"),), figure="not measured",
                     target=f"≤ {FAST_4G_TARGET:g} s")
    visible, engine = _med(_col(runs, "visible")), _med(_col(runs, "engine"))
    return Check(
        title, _verdict(visible <= FAST_4G_TARGET),
        ("A new Chromium profile opens the app (no vault) with DevTools' \"Fast 4G\" network preset "
         "(front_end/core/sdk/NetworkManager.ts Fast4GConditions: 9 Mbit/s down and 1.5 Mbit/s up, each × 0.9, "
         "latency 60 ms × 2.75 = 165 ms; CDP Network.emulateNetworkConditions, which reaches the page's workers "
         "too) and 4× CPU throttling (Emulation.setCPUThrottlingRate 4).  The first usable screen: the create "
         "form in a frame (it can be typed into, and its passphrase's Argon2id starts on submit); its submit "
         "completes once the vault engine is ready, reported beside it.  Median of "
         f"{len(runs)} runs; passes at ≤ {FAST_4G_TARGET:g} s."),
        (("navigation start -> create form shown, median", _s(visible)),
         ("navigation start -> vault engine ready (a create can complete), median", _s(engine)),
         ("runs, form / engine", ", ".join(f"{r['visible']:.2f} / {r['engine']:.2f} s" for r in runs)),
         ("bytes over the network by then", _mb(runs[0]["bytes"])),
         ("target", f"≤ {FAST_4G_TARGET:g} s to the first usable screen")),
        figure=f"{_s(visible)} (engine {_s(engine)})", target=f"≤ {FAST_4G_TARGET:g} s")


def _search_check(s: Sizes, e: Engine, d: dict[str, Any]) -> Check:
    title = f"{e.title}: search of {s.large:,} memories, p50"
    runs = d["runs"].get("large_search")
    if not runs:
        return Check(title, FAIL, "Not measured in this engine: the unlocked page of the larger vault was not "
                                  "reached (see the run's notes and error).", (("notes", "; ".join(d.get("notes", []))
                                                                               or "none"),),
                     figure="not measured", target=f"≤ {SEARCH_TARGET * 1e3:.0f} ms")
    r = runs[0]
    times = [float(t) / 1e3 for t in r["times"]]
    med = _med(times)
    hits = ", ".join(f"“{q}” {n:,}" for q, n in r["hits"].items())
    return Check(
        title, _verdict(med <= SEARCH_TARGET),
        (f"In the unlocked page of the {s.large:,}-memory vault, after its adds (the sync settled): the worker's "
         "`search` op called as the list screen calls it (web/js/vault.js `call`, the page's message to the vault "
         "worker and back), timed in the page.  The first call builds the index (the stemmer's wheel fetched from "
         "the service worker and unpacked, every listed memory stemmed; reported apart); then each of "
         f"{len(SEARCH_QUERIES)} queries {len(times) // len(SEARCH_QUERIES)} times in turn (a word, phrases, a "
         "question with stop words, a stemmed form, a diacritic folded, no match): the ranked ids of every "
         f"match, best first.  Median of those calls; passes at ≤ {SEARCH_TARGET * 1e3:.0f} ms."
         + (f"  {e.note}" if e.note else "")),
        (("search, median", _ms(med)),
         ("slowest call", _ms(max(times))),
         (f"first search: the index of {s.large:,} built (stemmer loaded), and the query", _ms(r["build"] / 1e3)),
         ("matches per query (ids sent to the page)", hits),
         ("target", f"≤ {SEARCH_TARGET * 1e3:.0f} ms")),
        figure=_ms(med), target=f"≤ {SEARCH_TARGET * 1e3:.0f} ms")


def _recall_check(n: int, reps: int) -> Check:
    """CPython: the one ranking over the bench corpus, directly, through saihm_recall's index
    (RecallIndex.page, its default page) and through the web worker's ListedSearch."""
    corpus = memories(n, seed=31)
    docs = [Doc(i.to_bytes(16, "big"), c, tags, "", CREATED + i) for i, (c, tags) in enumerate(corpus)]
    t0 = clock()
    ranking = Ranking()
    ranking.put(docs)
    build = clock() - t0
    index = RecallIndex()
    index.put(RecallEntry(d.key, d.content, bytes(32), bytes(12), 1, d.timestamp, "hot", bytes(8), "self",
                          "signed", None, False, tags=d.tags) for d in docs)
    listed = ListedSearch()
    listed.listed((d, Facets(d.tags, "semantic", "default", "self", False)) for d in docs)
    listed.ranking()
    every = Filters()
    ways = (("Ranking.search (every match, ranked)", lambda q: ranking.search(q)),
            ("RecallIndex.page (saihm_recall: the first page of 10)", lambda q: index.page(q)),
            ("ListedSearch.search (the web worker's search, every match)", lambda q: listed.search(q, every)))
    times: dict[str, list[float]] = {w: [] for w, _ in ways}
    for _ in range(reps):
        for q in SEARCH_QUERIES:
            for w, fn in ways:
                t = clock()
                fn(q)
                times[w].append(clock() - t)
    meds = {w: _med(ts) for w, ts in times.items()}
    worst = max(meds.values())
    return Check(
        f"CPython: recall of {n:,} memories, p50", _verdict(worst <= RECALL_TARGET),
        (f"ownmem's one ranking (ownmem.recall) in CPython over the {n:,} memories of the bench corpus (the web "
         "vault's texts and tags, one a second): the Ranking itself, saihm_recall's RecallIndex.page (its default "
         "page of 10, a lock around it) and the web worker's ListedSearch (the code the browser runs under "
         f"Pyodide, here in CPython).  The {len(SEARCH_QUERIES)} queries of the browser's search, {reps} times in "
         f"turn, each way interleaved.  Median per way; passes when each is ≤ {RECALL_TARGET * 1e3:.0f} ms."),
        (*((f"{w}, median", f"{_ms(m)} (slowest {_ms(max(times[w]))})") for w, m in meds.items()),
         (f"index of {n:,} built (Ranking.put, stemmer cache cold for the corpus's words)", _ms(build)),
         ("target", f"≤ {RECALL_TARGET * 1e3:.0f} ms each")),
        figure=f"worst {_ms(worst)}", target=f"≤ {RECALL_TARGET * 1e3:.0f} ms")


def _nojspi_check(s: Sizes, base: Figures, alt: Figures) -> Check:
    pairs = ((f"cached load, {s.small:,} (navigation -> list)", base.cached, alt.cached, _s),
             (f"unlock, {s.large:,} (submit -> list)", base.unlock, alt.unlock, _s),
             (f"add, vault of {s.small:,}", base.add_small, alt.add_small, _ms),
             (f"add, vault of {s.large:,}", base.add_large, alt.add_large, _ms),
             (f"fresh browser, {s.large:,}", base.fresh, alt.fresh, _s))
    ratios = [b2 / b1 for _, b1, b2, _f in pairs]
    ok = all(r <= NOJSPI_RATIO for r in ratios)   # NaN (not measured) compares false: a failure
    return Check(
        "Chromium without JSPI (/?jspi=0) within 1.3× of Chromium with JSPI",
        _verdict(ok),
        ("Each judged figure of Chromium on /?jspi=0 (the vault worker's path without WebAssembly JSPI, WebKit's "
         "path) over the same figure with JSPI, both measured in this run on the same vaults; passes when every "
         f"ratio is ≤ {NOJSPI_RATIO}."),
        tuple((label, f"{f(b1)} with JSPI, {f(b2)} without: × {b2 / b1:.2f}") for label, b1, b2, f in pairs),
        figure="not all measured" if any(math.isnan(r) for r in ratios) else f"worst × {max(ratios):.2f}",
        target=f"≤ × {NOJSPI_RATIO}")


# A diagnosis, not a figure: WebKit's speed run again with JavaScriptCore's optimizing WebAssembly
# tier (OMG) turned off.  On this 2-CPU machine WebKit's Pyodide boot and Python speed are several
# times faster so, i.e. the time goes into OMG compiling Pyodide's hot functions, competing for
# the CPUs with the page's own work.  No user runs that way; the judged figures above never do.
# (In WebKitGTK 2.50 the Python workloads after the boot have failed so, with an out-of-bounds
# memory access: the row then gives the boot and that error.)
NO_OMG = {"JSC_useOMGJIT": "false"}
NO_OMG_TITLE = ("WebKit (MiniBrowser) with JSC_useOMGJIT=false "
                "(diagnosis only: JavaScriptCore's optimizing wasm tier off)")


def _speed_only(e: Engine, url: str, tmp: Path, env: dict[str, str]) -> dict[str, Any] | None:
    """web_bench.mjs's speed probe alone in engine `e`, its JavaScriptCore given `env`."""
    out = tmp / f"web-bench-{e.key}-speed.json"
    cfg = {"engine": e.engine, "label": f"{e.key}-speed", "jspi": e.jspi, "server": url, "passphrase": PASSPHRASE,
           "out": str(out), "timeout_ms": 120_000, "fresh_timeout_ms": 300_000, "settle_ms": 0, **BINARIES,
           "vaults": [], "speed_only": True, "jsc_env": env}
    path = tmp / f"web-bench-config-{e.key}-speed.json"
    path.write_text(json.dumps(cfg))
    try:
        subprocess.run(["node", str(SCRIPT), str(path)], cwd=ROOT, timeout=900)
    except subprocess.TimeoutExpired:
        return None
    runs = json.loads(out.read_text()).get("runs", {}).get("speed") if out.exists() else None
    return _fastest(runs) if runs else None


def _fastest(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The faster of the speed runs, per workload; a run that failed part way keeps its boot and error."""
    ok = [r for r in runs if "error" not in r]
    if ok:
        return {k: min(float(r[k]) for r in ok) for k in ok[0]}
    return {"boot": min(float(r["boot"]) for r in runs), "error": str(runs[0]["error"])}


def _speed_check(speeds: dict[str, dict[str, Any]]) -> Check:
    """Where the time goes: the vault engine (CPython on WebAssembly) measured on its own."""
    base = speeds.get("chromium")
    rows: list[tuple[str, str]] = []
    titled = [(e.key, e.title) for e in ENGINES] + [("webkit-noomg", NO_OMG_TITLE)]
    for key, title in titled:
        sp = speeds.get(key)
        if not sp:
            continue
        if "error" in sp:
            rows.append((title, f"Pyodide boot {sp['boot']:.0f} ms; then the workloads failed: {sp['error']}"))
            continue
        rel = ("; × Chromium's: "
               + ", ".join(f"{k} {sp[k] / base[k]:.1f}" for k in sp if k in base and "error" not in base)
               if base and key != "chromium" else "")
        rows.append((title, f"Pyodide boot {sp['boot']:.0f} ms; Python loop {sp['loop']:.0f} ms, "
                              f"json {sp['json']:.0f} ms, import of the vault modules {sp['import']:.0f} ms; "
                              f"noble: 200 Ed25519 verifies {sp['ed25519']:.0f} ms, 50 ML-DSA-65 verifies "
                              f"{sp['mldsa']:.0f} ms, 1,000 AES-GCM opens of 1 KiB {sp['gcm']:.0f} ms; WebCrypto: "
                              f"the same opens {sp['webcrypto_gcm']:.0f} ms" + rel))
    return Check(
        "where the time goes: the vault engine's own speed in each engine", PASS,
        ("Printed to explain the figures above, not judged: in a page of each engine (a new profile, no app), "
         "Pyodide is loaded from the bundle and the wheel unpacked, then three fixed Python workloads are timed "
         "in Python: a loop of 300,000 steps (the interpreter), json dumps and loads of 20,000 small objects (C "
         "code compiled to WebAssembly), and the import of ownmem.vault and ownmem.web.api; then the "
         "JavaScript crypto the path without JSPI uses (glue-sync.js, @noble/*) and WebCrypto's AES-GCM, which "
         "the JSPI path uses.  The faster of two runs for each workload.  Every step of the app that runs "
         "Python (unlock, open and verify, list, seal) scales with these.  WebKit's is measured a second time "
         "with JavaScriptCore's optimizing "
         "WebAssembly tier (OMG) off (JSC_useOMGJIT=false in the environment of WebKitWebDriver and so of "
         "MiniBrowser), as a diagnosis only: where that is several times faster, WebKit's time goes into OMG "
         "compiling Pyodide's hot functions on this machine's 2 CPUs, not into the app (in WebKitGTK 2.50 the "
         "workloads after the boot have failed in that mode with an out-of-bounds memory access; the row then "
         "says so); the judged figures above are all taken with WebKit's defaults, as Safari runs."),
        tuple(rows) or (("result", "not measured"),), figure="see below", target="(informational)")


def _anchor_check(s: Sizes, figs: dict[str, Figures]) -> Check:
    rows: list[tuple[str, str]] = list(ANCHORS)
    for e in ENGINES:
        if e.key in figs:
            rows.append((f"ownmem in {e.title}, {s.large:,} memories, a fresh browser from the server",
                         _s(figs[e.key].fresh)))
            rows.append((f"ownmem in {e.title}, {s.small:,} memories, the app cached", _s(figs[e.key].cached)))
    return Check(
        "anchors: other end-to-end encrypted apps in the browser", PASS,
        ("Printed for scale, not judged: what users report for two other end-to-end encrypted apps, next to "
         "ownmem's figures above, each from navigation start to the list shown.  The reports are anecdotal, "
         f"from other machines and networks, for 2,000 items; ownmem's larger vault holds {s.large:,}."),
        tuple(rows), figure="see below", target="(informational)")


def _config_check(versions: dict[str, str], vaults: list[Prepared], loads: dict[str, tuple[str, str]],
                  wheel: str, state: dict[str, OnServer]) -> Check:
    pyodide = json.loads((ROOT / "node_modules" / "pyodide" / "package.json").read_text())["version"]
    rows = [(f"browser: {e.title}", versions.get(e.key, "not run")) for e in ENGINES]
    rows += [("drivers", "playwright-core (Chromium), puppeteer-core over WebDriver BiDi (Firefox), W3C WebDriver "
                         "over fetch to WebKitWebDriver, MiniBrowser under Xvfb (WebKit); viewport 1280×800; "
                         "the page's origin a counting pass-through proxy to the server"),
             ("vault engine", f"Pyodide {pyodide} (CPython bytecode precompiled at build), wheel {wheel}"),
             ("server", "`python -m server`, SQLite, one worker, 127.0.0.1, rate limits lifted")]
    for v in vaults:
        rows.append((f"vault of {v.n:,}", f"made by `UnlockedVault.add` in {v.add_seconds:.1f} s, linked and "
                                          f"pushed by `Syncer.sync_once` in {v.sync_seconds:.1f} s; "
                                          f"{len(state[v.key].added)} memories added by the engines in turn"))
    for e in ENGINES:
        if e.key in loads:
            rows.append((f"load average (1/5/15 min) at start / end of {e.title}",
                         f"{loads[e.key][0]} / {loads[e.key][1]}"))
    return Check("configuration", PASS, "What the web area ran on, besides the machine above.", tuple(rows),
                 figure=f"{len(versions)} engine run(s), one server", target="(informational)")


INTRO = (
    "The web app (PWA) in each browser engine on this machine: Chromium with and without WebAssembly JSPI "
    "(/?jspi=0), Firefox ESR and WebKit (WebKitGTK's MiniBrowser, the engine of Safari and of every browser on "
    "iPhone and iPad), each driven as its tests drive it.  The real bundle (`build.py build`) is served with "
    "the sync API by one `python -m server` (SQLite) on 127.0.0.1, the vault logic running under Pyodide in "
    "the page's module worker.  The two vaults are made once in CPython and pushed to the server; the engines "
    "run one after the other on them, each as new devices.  Each browser figure is taken inside the page "
    "(`performance.now()`, origin: the start of the navigation) by a probe that enters the passphrase the "
    "moment the form is in the document and watches for the list, so no harness round trip is in a figure "
    "(WebKit aside: see its notes).  The page renders the first 100 cards of a list, so \"list shown\" means: "
    "the summary counts every memory and the first cards are in a frame.  Absolute targets (issue 11's bar), "
    "judged per engine; other work on this 2-CPU machine (see the load averages) inflates every figure.")


def _available(e: Engine) -> str:
    missing = [BINARIES[k] for k in e.needs if not Path(BINARIES[k]).exists()]
    return f"not installed here: {', '.join(missing)} (python3 build.py setup installs it)" if missing else ""


def run(quick: bool = False) -> AreaResult:
    s = QUICK if quick else FULL
    # OWNMEM_BENCH_WEB_ENGINES=chromium,webkit: a subset of the engines, for work on the harness
    only = [k for k in os.environ.get("OWNMEM_BENCH_WEB_ENGINES", "").split(",") if k]
    engines = [e for e in ENGINES if not only or e.key in only]
    # OWNMEM_BENCH_WEB_VAULTS=small: the 1,000-memory vault only (its cached load and adds), for work on start-up
    keys = [k for k in os.environ.get("OWNMEM_BENCH_WEB_VAULTS", "").split(",") if k] or ["small", "large"]
    result = AreaResult("web", INTRO)
    tmp = Path(tempfile.mkdtemp(prefix="ownmem-bench-web-"))
    srv: ServerProcess | None = None
    try:
        web = _bundle(tmp)
        wheel = next((web / "wheels").glob("ownmem-*.whl")).name
        srv = ServerProcess("sqlite", tmp, {"OWNMEM_DATA_DIR": str(tmp / "server-data"),
                                            "OWNMEM_WEB_DIR": str(web)}, workers=1)
        srv.start()
        vaults = [_make_vault(tmp, srv.url, k, n) for k, n in (("small", s.small), ("large", s.large)) if k in keys]
        state = {v.key: OnServer(v.n, f"[{v.n - 1}] ") for v in vaults}
        figs: dict[str, Figures] = {}
        speeds: dict[str, dict[str, Any]] = {}
        versions: dict[str, str] = {}
        loads: dict[str, tuple[str, str]] = {}
        for e in engines:
            why = _available(e)
            if why:
                result.checks.append(Check(f"{e.title}: the run completed", FAIL, "The engine is missing.",
                                           (("engine", why),), figure="not run", target="runs"))
                continue
            n = {k: st.n for k, st in state.items()}
            load_start = machine.load()
            _say(f"{e.title}: {len(vaults)} vaults (load average {load_start}) ...")
            d = _browser(s, e, srv.url, vaults, state, tmp)
            loads[e.key] = (load_start, machine.load())
            versions[e.key] = str(d.get("version") or "unknown")
            if d.get("error"):
                print(f"--- {e.title}: {d['error']}\n--- server log (tail) ---\n{srv.tail()}", file=sys.stderr)
            result.checks += _engine_checks(s, e, d, n)
            result.checks.append(_first_visit_check(e, d))
            if e.key == "chromium":
                result.checks.append(_fast4g_check(d))
            if "large" in keys:
                result.checks.append(_search_check(s, e, d))
            figs[e.key] = _figures(d)
            if d["runs"].get("speed"):   # the faster of the two runs, per workload (the machine is shared)
                speeds[e.key] = _fastest(d["runs"]["speed"])
        webkit = next((e for e in engines if e.key == "webkit"), None)
        if webkit is not None and "webkit" in speeds:
            _say("WebKit's speed again with JSC_useOMGJIT=false (a diagnosis, not judged) ...")
            if (sp := _speed_only(webkit, srv.url, tmp, NO_OMG)) is not None:
                speeds["webkit-noomg"] = sp
        if "chromium" in figs and "chromium-nojspi" in figs:
            result.checks.append(_nojspi_check(s, figs["chromium"], figs["chromium-nojspi"]))
        _say(f"CPython: recall of {s.large:,} memories ...")
        result.checks.append(_recall_check(s.large, s.search_reps))
        result.checks += [_speed_check(speeds), _anchor_check(s, figs),
                          _config_check(versions, vaults, loads, wheel, state)]
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return result
