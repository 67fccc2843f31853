"""Forget OWNMEM_PASSPHRASE once it has done its work (issue 19, Build item 3; docs/decisions.md
"Widening needs the person's proof, not a file").

Removing it from ``os.environ`` is not enough: on Linux any process of the same OS user reads
``/proc/PID/environ``, which shows the environment block the process was started with (its
initial stack, not libc's current ``environ``), and Yama's ptrace_scope does not guard that file.
An agent started by `ownmem agent run` could read its parent's.  So the variable is unset and its
bytes in that block are overwritten through ``/proc/self/mem`` (env_start, env_end: proc(5),
/proc/PID/stat fields 50-51).  Best effort: where /proc is absent or the write is refused, the
variable is still unset and False says the block was not cleaned.
"""
from __future__ import annotations

import os

PASSPHRASE_ENV = "OWNMEM_PASSPHRASE"


def _bounds() -> tuple[int, int]:
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2:].split()      # from field 3 on (the name may hold spaces)
    return int(fields[50 - 3]), int(fields[51 - 3])


def scrubbed(block: bytes, name: str) -> bytes:
    """``block`` (NUL-separated NAME=value entries) with every ``name=...`` entry's bytes zeroed."""
    out, prefix = bytearray(block), name.encode() + b"="
    start = 0
    while start < len(out):
        end = out.find(b"\0", start)
        end = len(out) if end < 0 else end
        if bytes(out[start:start + len(prefix)]) == prefix:
            out[start:end] = bytes(end - start)
        start = end + 1
    return bytes(out)


def forget_passphrase_env(name: str = PASSPHRASE_ENV) -> bool:
    """Unset ``name`` and zero it in this process's initial environment block -> whether the block
    is clean (True also when it never held the variable)."""
    os.environ.pop(name, None)         # unsetenv: libc's environ no longer points into the block
    try:
        lo, hi = _bounds()
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(lo)
            block = mem.read(hi - lo)
            clean = scrubbed(block, name)
            if clean != block:
                mem.seek(lo)
                mem.write(clean)
        with open("/proc/self/environ", "rb") as f:
            return (name.encode() + b"=") not in f.read()
    except (OSError, ValueError, IndexError):
        return False
