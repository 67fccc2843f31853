"""The self-test's checks: each a function that returns or raises CheckFailed, and the helpers
they assert with (ownmem.web.selftest runs them, in the browser and under pytest)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ownmem.errors import AuthenticationFailed

h = bytes.fromhex
Check = Callable[[], None]


class CheckFailed(AssertionError):
    pass


def ok(cond: object, what: str = "check") -> None:
    if not cond:
        raise CheckFailed(what)


@contextmanager
def refusal(what: str = "must be refused") -> Iterator[None]:
    """The block raises exactly AuthenticationFailed, nothing else (a vector cannot pass by failing
    for another reason)."""
    try:
        yield
    except AuthenticationFailed:
        return
    raise CheckFailed(what)


def refused(f: Callable[[], object], what: str = "must be refused") -> None:
    with refusal(what):
        f()


def raises(exc: type[BaseException], f: Callable[[], object], what: str) -> None:
    try:
        f()
    except exc:
        return
    raise CheckFailed(what)


