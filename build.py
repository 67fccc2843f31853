#!/usr/bin/env python3
"""ownmem's one build entry point: setup | build | serve | test | typecheck-js | bench.

    python3 build.py setup          create .venv and install ownmem with its test dependencies;
                                    npm ci (pyodide, hash-wasm, @noble/post-quantum, playwright-core,
                                    puppeteer-core, esbuild, typescript); Chromium, WebKit (webkit2gtk-driver:
                                    WebKitWebDriver + MiniBrowser, xvfb) and Firefox ESR (firefox-esr)
                                    for the browser tests (apt-get, as root)
    python3 build.py build          setup, then assemble the web app (PWA) in web/dist/ (docs/web.md); offline
                                    after one setup (the worker's pure-Python wheels are kept in
                                    node_modules/.cache/ownmem-wheels)
    python3 build.py serve          build, then run the server with the web app on http://127.0.0.1:8000
                                    (SQLite under ./data; OWNMEM_DATABASE_URL selects PostgreSQL)
    python3 build.py test [ARGS]    build, then run the whole test suite: mypy --strict, ruff, the JavaScript
                                    type check, pytest, browser tests in Chromium (app.test.mjs twice:
                                    with JSPI and OWNMEM_JSPI=0), WebKit and Firefox ESR (with ARGS,
                                    only pytest, with those arguments)
    python3 build.py typecheck-js   npm ci (when the lock changed), then type-check the web app's
                                    JavaScript: tsc --noEmit over its JSDoc types (web/tsconfig.json,
                                    tsconfig.worker.json, tsconfig.node.json)
    python3 build.py bench [AREA]   setup, then run the benchmarks (AREA: core, server, ...; default all)
                                    and write the results to docs/benchmarks.md (an area not run
                                    keeps its section from the previous report)

Everything the project needs is installed from pyproject.toml into .venv and from
package-lock.json into node_modules, so the same two commands work on a fresh machine.
Only the standard library is used here.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".ownmem-setup"
NODE_MODULES = ROOT / "node_modules"
NPM_STAMP = NODE_MODULES / ".ownmem-lock-sha256"
CHROMIUM = Path("/usr/bin/chromium")
WEB = ROOT / "web"
DIST = WEB / "dist"
# what of web/ goes into the bundle (docs/web.md); anything else there is a source only
WEB_ENTRIES = ("index.html", "manifest.webmanifest", "sw.js", "icons", "css", "js")
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
# the placeholder web/sw.js carries; the build writes the bundle's version over it
SW_VERSION_MARK = "__OWNMEM_PRECACHE_VERSION__"
# fixed timestamps inside the wheel, so the same sources give the same bytes (and hash)
SOURCE_DATE_EPOCH = "315532800"    # 1980-01-01, the earliest a zip can say
SETUP_REV = b"2"                   # bump when setup() itself installs more
# the pure-Python dependencies the web worker's Python needs besides ownmem (docs/web.md "Build
# output"): each goes into the bundle as the wheel of the version installed in .venv, fetched once
# by `setup` into WHEEL_CACHE, so `build` then works offline
WORKER_WHEELS = ("snowballstemmer",)
WHEEL_CACHE = NODE_MODULES / ".cache" / "ownmem-wheels"
# the web app's type-check programs (one per global scope: the page, the workers, node)
TSCONFIGS = ("web/tsconfig.json", "web/tsconfig.worker.json", "web/tsconfig.node.json")
# what the lint gate of `test` reads (pyproject.toml [tool.ruff] says how)
LINTED = ("py/ownmem", "server", "tests", "benchmarks", "build.py")


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def _die(message: str) -> None:
    raise SystemExit(f"build.py: {message}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _inputs_digest() -> str:
    # Re-install only when what decides the environment changed.
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + SETUP_REV).hexdigest()


def setup() -> None:
    _setup_python()
    _setup_npm()
    _setup_worker_wheels()     # after npm ci, which empties node_modules (and the cache in it)
    _setup_chromium()
    _setup_webkit()
    _setup_firefox()


def _setup_python() -> None:
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    digest = _inputs_digest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    _run([str(PY), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    # The build backend too, so `build` can make the wheel without an isolated build
    # environment (which would go to the package index on every build).
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    _run([str(PY), "-m", "pip", "install", "--quiet", *requires])
    _run([str(PY), "-m", "pip", "install", "--quiet", "-e", ".[test]"])
    STAMP.write_text(digest)


def _setup_npm() -> None:
    # npm ci installs exactly package-lock.json; run it again only when the lock changed.
    # --ignore-scripts: no package runs code at install (esbuild works without its postinstall).
    digest = _sha256(ROOT / "package-lock.json")
    if NPM_STAMP.exists() and NPM_STAMP.read_text() == digest:
        return
    if shutil.which("npm") is None:
        _die("npm is not installed: install Node.js 20 or later (with npm), then run this again")
    _run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"])
    NPM_STAMP.write_text(digest)
    _setup_worker_wheels()     # npm ci emptied node_modules, and the wheel cache in it


def _worker_wheel(name: str) -> Path:
    """Where the wheel of ``name``, at the version .venv has, is kept (it may not be there yet)."""
    version = subprocess.run([str(PY), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
                             cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    return WHEEL_CACHE / f"{name}-{version}-py3-none-any.whl"


def _setup_worker_wheels() -> None:
    # The registry's own wheel (pure Python, any platform), exactly the version the CLI runs with,
    # so the browser stems with the same code; fetched once, then kept.
    for name in WORKER_WHEELS:
        wheel = _worker_wheel(name)
        if wheel.exists():
            continue
        WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
        version = wheel.name.split("-")[1]
        _run([str(PY), "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
              "-d", str(WHEEL_CACHE), f"{name}=={version}"])
        if not wheel.exists():
            _die(f"pip download gave no {wheel.name} (a pure-Python wheel of {name} is needed for the web app)")


WEBKIT = (Path("/usr/bin/WebKitWebDriver"), Path("/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser"),
          Path("/usr/bin/Xvfb"))
FIREFOX = Path("/usr/bin/firefox-esr")


def _setup_chromium() -> None:
    # The browser tests drive the system Chromium through playwright-core.
    _apt_install("Chromium", ["chromium"], (CHROMIUM,))


def _setup_webkit() -> None:
    # tests/browser/webkit.test.mjs: WebKitGTK's MiniBrowser under Xvfb, driven by WebKitWebDriver.
    _apt_install("WebKit", ["webkit2gtk-driver", "xvfb"], WEBKIT)


def _setup_firefox() -> None:
    # tests/browser/firefox.test.mjs: Firefox ESR headless, driven by puppeteer-core over WebDriver BiDi.
    _apt_install("Firefox ESR", ["firefox-esr"], (FIREFOX,))


def _apt_install(what: str, packages: list[str], paths: tuple[Path, ...]) -> None:
    """Install Debian `packages` unless every one of `paths` exists (as root, with apt-get);
    the package lists are refreshed only when the first attempt fails."""
    if all(p.exists() for p in paths):
        return
    names = " ".join(packages)
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        _die(f"{what} is missing ({', '.join(str(p) for p in paths)}) and cannot be installed here (needs root "
             f"and apt-get): install it, e.g. `sudo apt-get install -y {names}`, then run this again")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        try:
            _run(["apt-get", "install", "-y", *packages], env=env)
        except subprocess.CalledProcessError:
            _run(["apt-get", "update"], env=env)
            _run(["apt-get", "install", "-y", *packages], env=env)
    except subprocess.CalledProcessError:
        _die(f"installing {names} with apt-get failed (see above); install it, then run this again")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        _die(f"apt-get installed {names} but {', '.join(missing)} is still missing")


# ------------------------------------------------------------------ the web bundle
def build() -> None:
    """web/dist/ exactly as docs/web.md lays it out, from nothing but local inputs.

    Assembled in a fresh directory and swapped in at the end, so a server or a test
    run reading web/dist never sees a half-written bundle.
    """
    setup()
    started = time.monotonic()
    out = Path(tempfile.mkdtemp(prefix=".dist-", dir=WEB))
    try:
        _copy_web(out)
        _copy_pyodide(out / "pyodide")
        _bundle_vendor(out / "vendor")
        _build_wheel(out / "wheels")
        _copy_worker_wheels(out / "wheels")
        _compile_python(out)
        version = _write_precache(out)
        _compress(out)
        out.chmod(0o755)   # mkdtemp made it private
        old = WEB / f".dist-old-{os.getpid()}"
        if DIST.exists():
            DIST.rename(old)
        out.rename(DIST)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"built {DIST.relative_to(ROOT)} (version {version[:12]}) in {time.monotonic() - started:.1f} s",
          flush=True)


def _copy_web(out: Path) -> None:
    # vendor-entry.js is esbuild's input, not part of the bundle; scripts (the icon
    # generator) and dotfiles are sources only.
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n.startswith(".") or n == "__pycache__" or n.endswith(".py")
                or (Path(folder) == WEB / "js" and n == "vendor-entry.js")}
    for name in WEB_ENTRIES:
        src = WEB / name
        if src.is_dir():
            shutil.copytree(src, out / name, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, out / name)
        else:
            print(f"build.py: warning: web/{name} does not exist yet; the bundle lacks it", flush=True)


def _copy_pyodide(out: Path) -> None:
    out.mkdir(parents=True)
    for name in PYODIDE_FILES:
        shutil.copy2(NODE_MODULES / "pyodide" / name, out / name)


def _bundle_vendor(out: Path) -> None:
    # vendor/vendor.js, and what it imports dynamically (zxcvbn's dictionaries, about 1.6 MB)
    # split into chunks of their own: the vault worker imports vendor.js at every start and
    # would otherwise parse the dictionaries it never uses.
    _run([str(NODE_MODULES / ".bin" / "esbuild"), str(WEB / "js" / "vendor-entry.js"), "--bundle",
          "--format=esm", "--splitting", "--platform=browser", "--target=es2022", "--minify",
          "--legal-comments=eof", "--log-level=warning", f"--outdir={out}", "--entry-names=vendor",
          "--chunk-names=chunk-[hash]"])


def _build_wheel(out: Path) -> None:
    # Built from a copy of the sources: setuptools keeps build/ and *.egg-info next to
    # the sources, and a stale build/lib would put deleted modules into the wheel.
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)
    with tempfile.TemporaryDirectory(prefix="ownmem-wheel-") as tmp:
        src = Path(tmp) / "src"
        skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
        for name in ("py", "server"):
            shutil.copytree(ROOT / name, src / name, ignore=skip)
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (ROOT / name).exists():
                shutil.copy2(ROOT / name, src / name)
        cmd = [str(PY), "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(src)]
        try:
            _run([*cmd[:5], "--no-build-isolation", *cmd[5:]], env=env)
        except subprocess.CalledProcessError:
            print("build.py: the wheel did not build with the venv's setuptools; "
                  "trying an isolated build", flush=True)
            _run(cmd, env=env)
    wheels = sorted(out.glob("ownmem-*.whl"))
    if len(wheels) != 1:
        _die(f"expected one ownmem wheel in {out}, found {[w.name for w in wheels]}")


def _copy_worker_wheels(out: Path) -> None:
    # the worker unpacks them on first need (web/js/worker.js); the service worker precaches them
    for name in WORKER_WHEELS:
        wheel = _worker_wheel(name)
        if not wheel.exists():
            _die(f"{wheel.name} is not in {WHEEL_CACHE}: run `python3 build.py setup` (online) first")
        shutil.copyfile(wheel, out / wheel.name)


def _compile_python(out: Path) -> None:
    """Replace the bundle's python_stdlib.zip and its wheels by bytecode-compiled copies
    (web/pycompile.mjs: Pyodide's interpreter under node), so the browser does not compile
    Python source at every start.  Results are cached by input in node_modules/.cache."""
    script = WEB / "pycompile.mjs"
    pyodide = NODE_MODULES / "pyodide"
    salt = script.read_bytes() + (pyodide / "package.json").read_bytes()
    cache = NODE_MODULES / ".cache" / "ownmem-pycompile"
    jobs, hits = [], []
    for kind, path in (("stdlib", out / "pyodide" / "python_stdlib.zip"),
                       *(("wheel", w) for w in sorted((out / "wheels").glob("*.whl")))):
        cached = cache / f"{hashlib.sha256(salt + path.read_bytes()).hexdigest()}{path.suffix}"
        if cached.exists():
            hits.append((cached, path))
        else:
            jobs.append((kind, path, cached))
    if jobs:
        if shutil.which("node") is None:
            _die("node is not installed: install Node.js 20 or later, then run this again")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = [c.with_name(f".{c.name}.{os.getpid()}") for _, _, c in jobs]
        _run(["node", str(script), str(pyodide), *(f"{k}:{p}:{t}" for (k, p, _), t in zip(jobs, tmp, strict=True))])
        for (_, _, cached), t in zip(jobs, tmp, strict=True):
            t.replace(cached)   # complete files only: a cache entry is never half-written
        hits += [(c, p) for _, p, c in jobs]
    for cached, path in hits:
        shutil.copyfile(cached, path)


def _write_precache(out: Path) -> str:
    """precache.json: every file of the bundle with its sha256 and size, and the bundle's version.

    The version is the sha256 over the sorted "path hash" lines.  sw.js enters that list
    with the hash of its source, and then gets the version written into it: a new
    bundle is a new sw.js byte for byte, which is what makes browsers install the new
    service worker (and with it the new cache).  The list carries the final sw.js hash.
    """
    files = {"/" + p.relative_to(out).as_posix(): _sha256(p)
             for p in sorted(out.rglob("*")) if p.is_file() and p.name != "precache.json"}
    version = hashlib.sha256("".join(f"{k} {v}\n" for k, v in sorted(files.items())).encode()).hexdigest()
    sw = out / "sw.js"
    if sw.exists():
        text = sw.read_text(encoding="utf-8")
        if SW_VERSION_MARK not in text:
            _die(f"web/sw.js lacks the version placeholder {SW_VERSION_MARK}")
        sw.write_text(text.replace(SW_VERSION_MARK, version), encoding="utf-8")
        files["/sw.js"] = _sha256(sw)
    # each file's size too: the vault worker's progress bar counts its start's files against them
    sizes = {k: (out / k.lstrip("/")).stat().st_size for k in sorted(files)}
    doc = {"version": version, "files": dict(sorted(files.items())), "sizes": sizes}
    (out / "precache.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return version


def _compress(out: Path) -> None:
    """FILE.br and FILE.gz beside the bundle's files where they save (web/compress.mjs), for the
    server to send by Accept-Encoding (server/web.py).  After precache.json: the copies are
    encodings of the listed files, not files of the bundle, so the list never names them."""
    _run(["node", str(WEB / "compress.mjs"), str(NODE_MODULES / ".cache" / "ownmem-compress"), str(out)])


def typecheck_js() -> int:
    """TypeScript's checker over the web app's JavaScript and its JSDoc types (nothing is
    emitted): each program of TSCONFIGS, the worker protocol typed once in web/types/protocol.d.ts.
    -> 0, or 1 after the errors were printed."""
    tsc = NODE_MODULES / ".bin" / "tsc"
    failed = False
    for config in TSCONFIGS:
        print(f"+ tsc --noEmit -p {config}", flush=True)
        failed |= subprocess.run([str(tsc), "--noEmit", "-p", config], cwd=ROOT, check=False).returncode != 0
    return 1 if failed else 0


def test(args: list[str]) -> int:
    """The whole suite: the type checkers (mypy --strict over py/ownmem, server and tests, as
    configured in pyproject.toml; tsc over the web app's JavaScript), the linter (ruff over
    LINTED, pyproject.toml [tool.ruff]), pytest (CPython, server on SQLite and PostgreSQL), then
    the browser tests (node's test runner + playwright-core in headless Chromium).  With ARGS,
    only pytest runs, with those arguments.  A type error or a lint finding stops the run."""
    build()     # the browser tests load web/dist
    env = dict(os.environ)
    if not args:
        print("+ mypy (strict, pyproject.toml [tool.mypy])", flush=True)
        if subprocess.run([str(PY), "-m", "mypy"], cwd=ROOT, env=env).returncode != 0:
            print("build.py test: the type checker failed; fix the errors above", flush=True)
            return 1
        print(f"+ ruff check {' '.join(LINTED)} (pyproject.toml [tool.ruff])", flush=True)
        if subprocess.run([str(PY), "-m", "ruff", "check", *LINTED], cwd=ROOT, env=env).returncode != 0:
            print("build.py test: the linter failed; fix the findings above", flush=True)
            return 1
        if typecheck_js() != 0:
            print("build.py test: the JavaScript type check failed; fix the errors above", flush=True)
            return 1
    started = time.monotonic()
    # the whole run lists its slowest tests, so the hour the suite must stay under is watched
    # on up to 4 workers (pytest-xdist): most tests wait on a server, a browser-less subprocess
    # or Argon2id, and each has its own ports, folders and PostgreSQL database
    workers = str(min(4, os.cpu_count() or 1))
    py_rc = subprocess.run([str(PY), "-m", "pytest", *(args or ["-n", workers, "--durations=25"])], cwd=ROOT,
                           env=env).returncode
    if args:
        return py_rc
    py_seconds = time.monotonic() - started
    browser = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "browser").glob("*.test.mjs"))
    env["OWNMEM_PYTHON"] = str(PY)
    node_rc = subprocess.run(["node", "--test", "--test-concurrency=1", *browser], cwd=ROOT, env=env).returncode
    # the vault worker's path without WebAssembly JSPI (WebKit's), in Chromium too
    print("+ tests/browser/app.test.mjs with OWNMEM_JSPI=0 (the worker's path without JSPI)", flush=True)
    nojspi_rc = subprocess.run(["node", "--test", "tests/browser/app.test.mjs"], cwd=ROOT,
                               env=dict(env, OWNMEM_JSPI="0")).returncode
    node_rc = node_rc or nojspi_rc
    browser_seconds = time.monotonic() - started - py_seconds
    print(f"build.py test: pytest exit {py_rc} ({py_seconds / 60:.1f} min), browser tests exit {node_rc} "
          f"({browser_seconds / 60:.1f} min)", flush=True)
    return py_rc or node_rc


def serve(args: list[str]) -> int:
    build()
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
    if cmd == "build":
        build()
        return 0
    if cmd == "serve":
        return serve(rest)
    if cmd == "test":
        return test(rest)
    if cmd == "typecheck-js":
        _setup_npm()    # tsc is TypeScript's, from package-lock.json
        return typecheck_js()
    if cmd == "bench":
        return bench(rest)
    print(f"build.py: unknown command {cmd!r} (setup | build | serve | test | typecheck-js | bench)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
