"""Live sync (DESIGN.md "Sync": "a change feed by server sequence number ... with a live
notification stream"; server/live.py).

- `ownmem sync --watch` on device B (a real subprocess) picks up a memory that device
  A adds and syncs, within seconds, through the server's event stream; both backends.
- PostgreSQL with two server processes on one database: A pushes through process 1,
  B listens on process 2's event stream and is notified; both processes serve one
  change feed (identical seq -> cell id pairs, strictly increasing, no gaps), also
  while two devices push to the two processes at once, and a reader paging by
  ``since`` during those pushes never skips a change.
"""
from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from ownmem.errors import SyncError
from ownmem.vault import sync as sync_module
from ownmem.vault.remote import Remote
from tests.sync.synckit import CLI, PASSPHRASE, Backend, Device, Devices, ServerProcess, cli_env, feed, row_key

NOTIFY_WITHIN = 5.0


class Watcher:
    """`ownmem sync --watch` as a subprocess; its stdout lines arrive on a queue."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(CLI + ["sync", "--watch"], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stderr, self.err.append), daemon=True)]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream: Iterable[str], put: Callable[[str], None]) -> None:
        for line in stream:
            put(line.rstrip("\n"))

    def wait_for_stderr(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in x for x in self.err):
            assert self.proc.poll() is None, f"watcher exited: {self.err}"
            assert time.monotonic() < deadline, f"no {text!r} on stderr: {self.err}"
            time.sleep(0.05)

    def next_line(self, timeout: float) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing from the watcher in {timeout} s; stderr: {self.err}") from None

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        for t in self._threads:
            t.join(5)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, "\n".join(self.err)


def test_sync_watch_receives_a_memory_added_on_another_device(
        backend: Backend, servers: Callable[..., ServerProcess], devices: Devices, tmp_path: Path) -> None:
    server = servers(backend, label="watch")
    name = f"watch-{backend.kind}"
    a = devices.first(server.url, name)
    b = devices.join(server.url, name)
    w = Watcher(cli_env(tmp_path, b.folder))
    try:
        w.wait_for_stderr("watching for changes", 60)
        time.sleep(1.5)                 # its first sync_once, then it follows the event stream
        for text in ("added on A while B watches", "and a second one"):
            a.v.add(text)
            t0 = time.monotonic()
            assert a.sync().pushed == 1
            line = w.next_line(NOTIFY_WITHIN)
            assert time.monotonic() - t0 < NOTIFY_WITHIN
            assert line.endswith("synced: pushed 0, pulled 1"), line
            assert text in b.contents()          # B's vault lists it
        b.v.add("added on B while it watches")   # a local change is pushed at the next event
        a.v.add("the event that wakes B")
        a.sync()
        line = w.next_line(NOTIFY_WITHIN)
        assert line.endswith("synced: pushed 1, pulled 1"), line
        a.sync()
        assert "added on B while it watches" in a.contents()

        server.kill()                             # the watcher survives a server crash and reconnects
        server.start()
        a.v.add("after the server came back")
        a.sync()
        line = w.next_line(NOTIFY_WITHIN + 5)
        assert line.endswith("synced: pushed 0, pulled 1"), line
        assert "after the server came back" in b.contents()
        assert w.proc.poll() is None
    finally:
        code, err = w.stop()
    assert code == 130 and err.splitlines()[-1] == "ownmem: interrupted", err
    assert PASSPHRASE not in err and "Traceback" not in err


# ------------------------------------------------------------------ two server processes


def _listen(remote: Remote, out: queue.Queue[object]) -> None:
    try:
        for seq in remote.events():
            out.put(seq)
    except SyncError as e:
        out.put(e)


@pytest.fixture
def two(pg_backend: Backend, servers: Callable[..., ServerProcess]) -> tuple[ServerProcess, ServerProcess]:
    return servers(pg_backend, label="proc1"), servers(pg_backend, label="proc2")


@pytest.fixture
def listener_client() -> Iterator[httpx.Client]:
    c = httpx.Client(timeout=30.0)
    yield c
    c.close()


def test_event_stream_of_one_process_is_notified_of_a_push_through_the_other(
        two: tuple[ServerProcess, ServerProcess], devices: Devices, listener_client: httpx.Client) -> None:
    one, other = two
    a = devices.first(one.url, "live-two")
    b = devices.join(other.url, "live-two")
    b.syncer.ensure_login()
    events = Remote(other.url, "live-two", client=listener_client)
    events.token = b.remote.token
    got: queue.Queue[object] = queue.Queue()
    listener = threading.Thread(target=_listen, args=(events, got), daemon=True)
    listener.start()
    try:
        first = got.get(timeout=NOTIFY_WITHIN)
        assert first == b.remote.changes(0).last_seq          # at once: the current position
        for i in range(3):
            a.v.add(f"pushed through process 1, #{i}")
            t0 = time.monotonic()
            a.sync()
            want = a.remote.changes(0).last_seq
            seq = got.get(timeout=NOTIFY_WITHIN)
            while seq != want:                              # coalesced or intermediate values are fine
                assert isinstance(seq, int) and seq < want, seq
                seq = got.get(timeout=NOTIFY_WITHIN - (time.monotonic() - t0))
            assert time.monotonic() - t0 < NOTIFY_WITHIN
            assert b.sync().pulled == 1
            assert f"pushed through process 1, #{i}" in b.contents()
    finally:
        t0 = time.monotonic()
        graceful = other.stop()                             # SIGTERM, with the stream still open
        listener.join(20)
    assert graceful and time.monotonic() - t0 < 10, "an open event stream held up the shutdown"
    assert not listener.is_alive()
    assert isinstance(got.get(timeout=1), SyncError)        # the client saw the stream end


def _assert_one_feed(d1: Device, d2: Device) -> list[tuple[int, str, bytes | None]]:
    f1, f2 = feed(d1.remote, page=7), feed(d2.remote, page=13)
    assert f1 == f2
    assert [s for s, _, _ in f1] == list(range(1, len(f1) + 1))      # strictly increasing, no gaps
    cells = [c for _, k, c in f1 if k == "cell"]
    assert len(cells) == len(set(cells))
    return f1


def test_both_processes_serve_one_change_feed_under_concurrent_pushes(
        two: tuple[ServerProcess, ServerProcess], devices: Devices, monkeypatch: pytest.MonkeyPatch) -> None:
    one, other = two
    a = devices.first(one.url, "feed-two")
    c = devices.join(other.url, "feed-two", label="c")
    a.v.add("before the race")
    a.sync()
    c.sync()
    _assert_one_feed(a, c)
    before = a.v.store.object_ids()

    per_device = 150
    for i in range(per_device):
        a.v.add(f"A#{i}")
        c.v.add(f"C#{i}")
    monkeypatch.setattr(sync_module, "PUSH_BATCH", 10)   # many small pushes, so they interleave

    # A reader paging by `since` on process 2 while both push: it must never skip a change.
    seen: list[tuple[int, str, bytes | None]] = []
    done = threading.Event()
    reader_errors: list[BaseException] = []

    def read() -> None:
        since = 0
        try:
            while True:
                stop = done.is_set()
                p = c.remote.changes(since, 5)
                seen.extend(row_key(r) for r in p.rows)
                since = p.next_since
                if stop and not p.more:
                    return
        except BaseException as e:  # noqa: BLE001 - reported below
            reader_errors.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    errors: list[BaseException] = []
    go = threading.Barrier(2)

    def push(d: Device) -> None:
        try:
            go.wait()
            d.syncer.push(sync_module.SyncReport())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pushers = [threading.Thread(target=push, args=(d,)) for d in (a, c)]
    for t in pushers:
        t.start()
    for t in pushers:
        t.join(180)
    done.set()
    reader.join(60)
    assert errors == [] and reader_errors == []

    f = _assert_one_feed(a, c)
    assert seen == f                                    # the concurrent reader saw exactly the feed
    assert len([x for x in f if x[1] == "cell"]) == 2 * per_device + 1
    race = {d: set(d.v.store.cell_ids_of(d.v.store.object_ids() - before).values()) for d in (a, c)}
    seqs = {d: [s for s, _, cid in f if cid in race[d]] for d in (a, c)}
    assert len(seqs[a]) == len(seqs[c]) == per_device
    assert min(seqs[a]) < max(seqs[c]) and min(seqs[c]) < max(seqs[a]), "the two pushes did not overlap"

    a.sync()
    c.sync()
    assert a.v.store.object_ids() == c.v.store.object_ids() and len(a.v.store.object_ids()) == 2 * per_device + 1
    assert {e.opened.content for e in a.listing().entries} >= {f"C#{i}" for i in range(per_device)}
