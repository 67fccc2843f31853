"""The person's approval header (ownmem.uomp.approval), pure: its MAC against the format as
written in the module docstring, and every way an approval fails."""
from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest

from ownmem.uomp.approval import WINDOW, Approval, ApprovalRefused, Nonces, check, sign

KEY = bytes(range(32))
AUD = "http://127.0.0.1:9374"
BODY = b'{"granted_scopes": {"read": {"tags": ["ui"]}}}'
PATH = "/v1/sessions/sess_a/grant"
NOW = 1_800_000_000


def test_the_mac_is_the_documented_hmac_over_audience_method_path_body_time_and_nonce() -> None:
    msg = b"\n".join([b"ownmem-uomp-approval-v1", AUD.encode(), b"POST", PATH.encode(),
                      hashlib.sha256(BODY).hexdigest().encode(), str(NOW).encode(), b"N" * 22])
    mac = base64.urlsafe_b64encode(hmac.new(KEY, msg, hashlib.sha256).digest()).rstrip(b"=").decode()
    assert sign(KEY, AUD, "POST", PATH, BODY, NOW, "N" * 22) == f"v1.{NOW}.{'N' * 22}.{mac}"
    assert check(KEY, f"v1.{NOW}.{'N' * 22}.{mac}", AUD, "POST", PATH, BODY, NOW) == Approval(NOW, "N" * 22)


@pytest.mark.parametrize("change", ["key", "audience", "method", "path", "body", "time", "nonce"])
def test_an_approval_authorizes_only_the_request_it_names(change: str) -> None:
    h = sign(KEY, AUD, "POST", PATH, BODY, NOW)
    args: dict[str, Any] = {"key": KEY, "audience": AUD, "method": "POST", "path": PATH, "body": BODY}
    if change in ("time", "nonce"):
        v, t, n, m = h.split(".")
        other = n[:-1] + ("A" if n[-1] != "A" else "B")
        h = ".".join([v, str(int(t) + 1), n, m] if change == "time" else [v, t, other, m])
    else:
        args[change] = {"key": bytes(32), "audience": "http://127.0.0.1:9375", "method": "PUT",
                        "path": "/v1/sessions/sess_b/grant", "body": BODY.replace(b"ui", b"identity")}[change]
    with pytest.raises(ApprovalRefused, match="does not verify"):
        check(args["key"], h, args["audience"], args["method"], args["path"], args["body"], NOW)


def test_malformed_and_stale_approvals_are_refused() -> None:
    for bad in (None, "", "v1", "v2.1.nnnnnnnnnnnnnnnn.x", f"v1.-{NOW}.{'n' * 22}.x", f"v1.{NOW}.short.x",
                f"v1.{NOW}.{'n' * 22}.!!!", "v1." + "9" * 300):
        with pytest.raises(ApprovalRefused):
            check(KEY, bad, AUD, "POST", PATH, BODY, NOW)
    for at in (NOW - WINDOW - 1, NOW + WINDOW + 1):
        with pytest.raises(ApprovalRefused, match="time window"):
            check(KEY, sign(KEY, AUD, "POST", PATH, BODY, at), AUD, "POST", PATH, BODY, NOW)
    check(KEY, sign(KEY, AUD, "POST", PATH, BODY, NOW - WINDOW), AUD, "POST", PATH, BODY, NOW)


def test_the_replay_cache_refuses_a_second_use_and_stays_bounded() -> None:
    seen = Nonces(limit=3)
    seen.admit(Approval(NOW, "a" * 22), NOW)
    with pytest.raises(ApprovalRefused, match="replayed"):
        seen.admit(Approval(NOW, "a" * 22), NOW + 5)
    seen.admit(Approval(NOW, "b" * 22), NOW)
    seen.admit(Approval(NOW, "c" * 22), NOW)
    with pytest.raises(ApprovalRefused, match="too many"):        # full of live nonces: fail closed
        seen.admit(Approval(NOW, "d" * 22), NOW)
    # once they are older than the window they leave (a replay of one is then stale for check)
    seen.admit(Approval(NOW + WINDOW + 1, "d" * 22), NOW + WINDOW + 1)
    with pytest.raises(ApprovalRefused, match="replayed"):
        seen.admit(Approval(NOW + WINDOW + 1, "d" * 22), NOW + WINDOW + 2)
