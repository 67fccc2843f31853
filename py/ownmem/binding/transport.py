"""The SAIHM HTTPS binding as the client sees it (SAIHM custodial profile, "HTTPS binding",
"Transport requirements"): the request a tool call becomes (``Call``), how one HTTP answer is
judged (``interpret``: an ``Answer`` or a ``Failure``, the operator's {"error": code} read as
ownmem.saihm.errors spells it) and a call prepared before sending (``Prepared``).  Pure: the
bytes travel in ownmem.mcp.transport."""
from __future__ import annotations

import enum
import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ownmem.binding.fields import compact, member, printable

MAX_BODY = 16 * 1024 * 1024          # the bound the spec's implementation uses ("Transport requirements")
DEFAULT_TIMEOUT = 30.0
# the shape of an operator's {"error": code}, read only when it has it (ownmem.saihm.errors: ownmem's own)
_ERROR_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
LOCAL_HOSTS = ("127.0.0.1", "localhost")      # the only hosts an http endpoint may name


@dataclass(frozen=True, slots=True)
class Answer:
    """A 2xx answer whose body is JSON: the tool's result, not yet checked."""

    status: int
    value: object


class Kind(str, enum.Enum):
    REFUSED = "refused"                      # a pre-send check failed: nothing was sent
    UNCONFIGURED = "unconfigured"            # the endpoint or credential was refused: nothing was sent
    NOT_DELIVERED = "not_delivered"          # no connection: nothing was sent
    CERTIFICATE = "certificate"              # the TLS certificate did not validate: nothing was sent
    TIMEOUT = "timeout"
    BROKEN = "broken"                        # the connection failed after the call was sent
    REDIRECT = "redirect"
    TOO_LARGE = "too_large"
    INTERMEDIARY = "intermediary"            # 2xx, but the body is not JSON
    MALFORMED_JSON = "malformed_json"        # 2xx JSON that repeats a member name or uses NaN/Infinity
    STATUS = "status"                        # 4xx or 5xx: the operator's failure status
    UNEXPECTED_STATUS = "unexpected_status"  # neither 2xx, 3xx, 4xx nor 5xx


NOTHING_SENT = frozenset({Kind.REFUSED, Kind.UNCONFIGURED, Kind.NOT_DELIVERED, Kind.CERTIFICATE})


@dataclass(frozen=True, slots=True)
class Failure:
    """Why no checkable answer exists.  Every text field is the client's own or passed ``printable``."""

    kind: Kind
    detail: str | None = None     # the client's own sentence (REFUSED, UNCONFIGURED); never an input value
    status: int | None = None
    reason: str | None = None     # the HTTP reason phrase, only when it is plain printable ASCII
    code: str | None = None       # the operator's {"error": code}, only when it has the shape of one
    content_type: str | None = None
    seconds: float | None = None  # the timeout that ran out
    origin: str | None = None     # NOT_DELIVERED: the endpoint's scheme://host:port (the client's own setting)

    @property
    def nothing_sent(self) -> bool:
        return self.kind in NOTHING_SENT

    @property
    def operator_failed(self) -> bool:
        """The operator answered with a failure status (4xx/5xx)."""
        return self.kind is Kind.STATUS

    def sentence(self) -> str:
        k = self.kind
        if k in (Kind.REFUSED, Kind.UNCONFIGURED):
            return f"{self.detail}; nothing was sent."
        if k is Kind.NOT_DELIVERED:
            return not_delivered(self.origin)
        if k is Kind.CERTIFICATE:
            return "The operator's TLS certificate could not be validated; nothing was sent."
        if k is Kind.TIMEOUT:
            return (f"The operator did not answer within {self.seconds:g} s; "
                    "it may or may not have acted.")
        if k is Kind.BROKEN:
            return ("The connection failed before a complete answer arrived; "
                    "the operator may or may not have acted.")
        if k is Kind.REDIRECT:
            return (f"The endpoint answered HTTP {self.status}, a redirect, which this client never follows; "
                    "nothing was sent anywhere else and the call did not complete.")
        if k is Kind.TOO_LARGE:
            return (f"The answer was larger than {MAX_BODY // (1024 * 1024)} MiB and was not read; "
                    "the operator may or may not have acted.")
        if k is Kind.INTERMEDIARY:
            ct = f" ({self.content_type})" if self.content_type else ""
            return (f"HTTP {self.status} came with a body that is not JSON{ct}: probably an intermediary "
                    "(a proxy or captive portal) answered, not the operator; it may or may not have acted.")
        if k is Kind.MALFORMED_JSON:
            return (f"HTTP {self.status} came with JSON that repeats a member name or holds NaN or Infinity; "
                    "it is read as malformed, and the operator may or may not have acted.")
        if k is Kind.STATUS:
            reason = f" {self.reason}" if self.reason else ""
            code = f" (error {self.code})" if self.code else ""
            return f"The operator answered HTTP {self.status}{reason}{code}."
        return (f"The endpoint answered HTTP {self.status}, neither success nor failure; "
                "the operator may or may not have acted.")

    def to_json(self) -> dict[str, Any]:
        return compact({"kind": self.kind.value, "status": self.status, "reason": self.reason,
                         "code": self.code, "contentType": self.content_type, "seconds": self.seconds,
                         "detail": self.detail, "origin": self.origin})


# the one operator an ownmem client reaches on this machine is `ownmem agent`; the person who reads
# the model's answer must learn how to start it (issue 22), and an agent run on another port is the
# other way the call fails
START_AGENT = "start it with `ownmem agent` in a terminal (and keep it running), then call again"


def not_delivered(origin: str | None) -> str:
    """Nothing answers at the endpoint: what is not running, and how to start it."""
    if origin is not None and urllib.parse.urlsplit(origin).hostname in LOCAL_HOSTS:
        return (f"ownmem agent is not running at {origin} (nothing answers there); the call was not delivered. "
                f"To use this memory, {START_AGENT}. If it runs on another port, SAIHM_ENDPOINT_URL must name "
                "that port (`ownmem agent connect NAME` prints the configuration).")
    return ("Could not connect to the operator; the call was not delivered. If the operator is your own "
            f"`ownmem agent`, {START_AGENT}.")


def refused(detail: str) -> Failure:
    return Failure(Kind.REFUSED, detail=detail)


class _Duplicate(ValueError):
    pass


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate
        out[k] = v
    return out


def _no_constant(_: str) -> Any:
    raise _Duplicate        # NaN, Infinity and -Infinity are not JSON


def _reason(raw: bytes) -> str | None:
    text = raw.decode("latin-1").strip(" ")
    return text if text and len(raw) <= 128 and all(0x20 <= b <= 0x7E for b in raw) else None


def interpret(status: int, reason: bytes, content_type: str | None, body: bytes) -> Answer | Failure:
    """One HTTP answer, bounded and read in full by the HTTP layer, as the binding defines it."""
    if 300 <= status < 400:
        return Failure(Kind.REDIRECT, status=status)
    if 200 <= status < 300:
        try:
            value = json.loads(body.decode("utf-8"), object_pairs_hook=_object_pairs,
                               parse_constant=_no_constant)
        except _Duplicate:
            return Failure(Kind.MALFORMED_JSON, status=status)
        except (ValueError, RecursionError):     # not UTF-8, not JSON, nested past the parser's depth
            return Failure(Kind.INTERMEDIARY, status=status, content_type=printable(content_type, 100))
        return Answer(status, value)
    if 400 <= status < 600:
        return Failure(Kind.STATUS, status=status, reason=_reason(reason), code=_error_code(body))
    return Failure(Kind.UNEXPECTED_STATUS, status=status)


def _error_code(body: bytes) -> str | None:
    try:
        value = json.loads(body.decode("utf-8"), object_pairs_hook=_object_pairs, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    code = member(value, "error")
    return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else None


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTPS-binding request: {"method": <tool>, "params": {...}}."""

    method: str
    params: Mapping[str, object]

    def body(self) -> bytes:
        # ASCII-only JSON: a lone surrogate an MCP host passed in travels as an escape, never raw
        return json.dumps({"method": self.method, "params": dict(self.params)},
                          separators=(",", ":"), ensure_ascii=True).encode("ascii")


class Result(Protocol):
    """What a tool call comes to.  ``ok`` is false for anything short of a confirmed outcome."""

    @property
    def ok(self) -> bool: ...

    def report(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


Finish = Callable[[Answer | Failure], Result]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A call ready to send (``call`` None: refused before sending) and how to judge its answer."""

    call: Call | None
    finish: Finish
    refusal: Failure | None = None

    def refused_result(self) -> Result:
        assert self.refusal is not None
        return self.finish(self.refusal)


def ready(method: str, params: Mapping[str, object], finish: Finish) -> Prepared:
    return Prepared(Call(method, params), finish)


def refuse(detail: str, finish: Finish) -> Prepared:
    return Prepared(None, finish, refused(detail))


def failed_lines(head: str, f: Failure, *advice: str) -> str:
    return "\n".join([f"{head}: {f.sentence()}", *(a for a in advice if a)])


def result_json(tool: str, outcome: str, failure: Failure | None, **fields: Any) -> dict[str, Any]:
    return compact({"tool": tool, "outcome": outcome, **fields,
                     "failure": failure.to_json() if failure else None})
