"""What the figures were measured on: CPU, cores, RAM, OS, Python, libraries, command."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("cryptography", "pynacl", "argon2-cffi", "apertomemory", "cbor2", "pycose")


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cores() -> str:
    logical = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    physical = {line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("cpu cores")}
    phys = f", {physical.pop()} cores per socket" if len(physical) == 1 else ""
    return f"{logical} logical CPUs ({usable} usable by this process{phys})"


def ram() -> str:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            kib = int(line.split()[1])
            return f"{kib / 1024 / 1024:.1f} GiB"
    return "unknown"


def os_name() -> str:
    pretty = ""
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            pretty = line.split("=", 1)[1].strip().strip('"')
    return f"{pretty or platform.system()} (kernel {platform.release()}, {platform.machine()})"


def filesystem(path: Path) -> str:
    """The filesystem the temporary vaults live on (vault I/O depends on it)."""
    best, fstype = "", "unknown"
    target = str(path.resolve())
    for line in _read("/proc/mounts").splitlines():
        parts = line.split()
        if len(parts) >= 3 and target.startswith(parts[1]) and len(parts[1]) > len(best):
            best, fstype = parts[1], parts[2]
    return f"{fstype} (mounted at {best or '?'})"


def command(args: list[str]) -> str:
    """The command as typed when the parent is build.py, else the module invocation."""
    parent = _read(f"/proc/{os.getppid()}/cmdline").split("\0")
    parent = [a for a in parent if a]
    if any(Path(a).name == "build.py" for a in parent):
        i = next(i for i, a in enumerate(parent) if Path(a).name == "build.py")
        return " ".join(["python3", "build.py", *parent[i + 1:]])
    return " ".join([".venv/bin/python", "-m", "benchmarks", *args])


def libraries() -> str:
    out = []
    for name in LIBRARIES:
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "py"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return f"{rev}{' + uncommitted changes under py/' if dirty else ''}"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def load() -> str:
    """The 1/5/15-minute load averages: other work on the machine inflates absolute times."""
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def describe(args: list[str], tmp: Path, load_at_start: str) -> list[tuple[str, str]]:
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return [
        ("CPU", cpu_model()),
        ("Cores", cores()),
        ("RAM", ram()),
        ("OS", os_name()),
        ("Python", f"{platform.python_implementation()} {sys.version.split()[0]}"),
        ("Libraries", libraries()),
        ("ownmem revision", revision()),
        ("Temporary vaults on", filesystem(tmp)),
        ("Load average (1/5/15 min)", f"{load_at_start} at start, {load()} at end "
                                       f"({os.cpu_count() or '?'} CPUs)"),
        ("Date", now.isoformat().replace("+00:00", "Z")),
        ("Command", f"`{command(args)}`"),
    ]
