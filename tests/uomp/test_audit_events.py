"""The draft's event types for sessions and deletion proofs in the synced, anchored audit (UOMP
draft-00 18.4.1 "Event Types", 18.4.2 "Batching Strategy", 19.6 "Deletion Proof Anchoring"):
an accepted deletion proof is a DataDeletionProofSubmitted event whose deletionProofHash another
device recomputes from the proof and verifies up to the anchored root; a replayed one is a
refused GatewayAccess; grants, revocations and deletion proofs are anchored near real-time, not
at the next batch tick."""
from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

from Crypto.Hash import keccak
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ownmem.agent import audit_batches as ab, audit_sync as au
from ownmem.crypto import sha256
from ownmem.uomp.guard import proof_message
from ownmem.uomp.tokens import iso
from tests.sync.synckit import Backend, Devices, ServerProcess
from tests.uomp.uompkit import Uomp, UompVault, error_body

READ = {"tags": ["preference"]}
TICK = 60                 # s: the batch tick of the service under test (OWNMEM_UOMP_BATCH_SECONDS)


def _k(b: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=b).digest()


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _batch_with(phone: Any, pred: Callable[[dict[str, Any]], bool], since: float) -> ab.Batch:
    """The synced batch holding an entry ``pred`` picks, once it reaches the phone (a batch is
    anchored in the log before it is sealed): it must come well before the service's tick."""
    while True:
        phone.sync()
        for b in ab.read_batches(phone.listing().entries):
            if any(pred(e) for e in b.doc["entries"]):
                return b
        assert time.monotonic() - since < TICK - 15, "not anchored before the batch tick"
        time.sleep(0.2)


def test_a_deletion_proof_is_anchored_at_once_and_a_device_recomputes_its_event(
        sqlite_backend: Backend, servers: Callable[..., ServerProcess], uomp_vault: Callable[..., UompVault],
        agents: Callable[..., Any], devices: Devices) -> None:
    srv = servers(sqlite_backend)
    uv = uomp_vault(srv.url)
    agent = agents(uv.vault)
    agent.stop()
    agent.env[au.INTERVAL_ENV] = str(TICK)   # access events wait for the tick; these must not
    agent.start()
    u = Uomp(agent.port, uv.vault.folder)
    phone = devices.join(srv.url, uv.vault.name, label="phone")
    ident = Ed25519PrivateKey.generate()
    create = {"proof_required": True, "deletion_method": "secure_wipe",
              "identity_key": _b64(ident.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))}

    # grants: SessionGranted, anchored near real-time
    t = time.monotonic()
    sid, tok = u.session(READ, create=create)
    other, _ = u.session(READ, create=create)
    _batch_with(phone, lambda e: e["action"] == "grant" and e["session_id"] == other, t)
    # a read is an access event: batched, it waits (for the tick, or for an urgent entry's batch)
    assert u.get("/v1/memory/preference.theme", tok).status_code == 200

    # the proof: anchored at once, and the read that waited in the same batch
    proof = {"deletion_proof_id": "del_anchor_1", "session_id": sid, "agent_id": "calendar_agent",
             "deleted_at": iso(time.time()), "memory_hash": "sha256:" + "cd" * 32,
             "fields_accessed": ["key", "value"], "method": "secure_wipe"}
    proof["proof_value"] = _b64(ident.sign(proof_message(proof)))
    t = time.monotonic()
    r = u.post(f"/v1/sessions/{sid}/deletion-proof", tok, proof)
    assert r.json() == {"status": "accepted", "deletion_proof_id": "del_anchor_1"}, r.text
    b = _batch_with(phone, lambda e: e["action"] == "deletion_proof" and e["allowed"], t)
    assert "read" in {e["action"] for e in b.doc["entries"]}
    # replayed: refused, and audited as an access refused
    error_body(u.post(f"/v1/sessions/{sid}/deletion-proof", tok, proof), 403, "ACCESS_DENIED", sid)
    # a revocation: SessionRevoked, anchored near real-time too
    t = time.monotonic()
    assert u.admin("POST", f"/v1/sessions/{other}/revoke").status_code == 200
    _batch_with(phone, lambda e: e["action"] == "revoked", t)

    # the person's phone: every batch anchored and whole; the proof's event recomputed from the proof
    view = ab.audit_view(phone.listing().entries, holder_id=phone.v.holder().holder_id,
                         anchor_check=ab.log_anchor_check(phone.syncer))
    assert view.warnings == [] and view.anchored == view.batches >= 3
    batches = ab.read_batches(phone.listing().entries)
    assert b.doc["sessions"][sid]["deletion_proofs"] == {"del_anchor_1": "sha256:" + "cd" * 32}
    sh = _k(sid.encode() + b"calendar_agent" + b'["preference"]')
    ah = _k(b"calendar_agent")
    expected = _k(_k(b"DataDeletionProofSubmitted(bytes32,bytes32,bytes32)") + sh + ah
                  + _k(b"del_anchor_1" + sid.encode() + b"sha256:" + b"cd" * 32))
    leaves = []
    for e in b.doc["entries"]:
        if e["action"] == "deletion_proof" and e["allowed"]:
            assert e["key"] == "del_anchor_1"
            leaves.append(expected + sha256(ab.canonical(e)))
        else:
            leaves.append(ab.leaf(e, b.doc["sessions"].get(e["session_id"], {})))
    assert ab.merkle_root(leaves) == b.root
    # the replay: GatewayAccess, allowed false, on the deletion-proof path
    replay = next(e for bb in batches for e in bb.doc["entries"]
                  if e["action"] == "deletion_proof" and not e["allowed"])
    assert replay["reason"] == "deletion proof replayed" and replay["key"] is None
    owner = next(bb for bb in batches if replay in bb.doc["entries"])
    assert ab.event_hash(replay, owner.doc["sessions"][sid]) == _k(
        _k(b"GatewayAccess(bytes32,bytes32,bytes32,bool)") + sh + ah
        + _k(f"/v1/sessions/{sid}/deletion-proof".encode()) + (0).to_bytes(32, "big"))
    # the grant and the revocation: SessionGranted and SessionRevoked
    rv = next(bb for bb in batches if any(e["action"] == "revoked" for e in bb.doc["entries"]))
    e_rv = next(e for e in rv.doc["entries"] if e["action"] == "revoked")
    sh_o = _k(other.encode() + b"calendar_agent" + b'["preference"]')
    assert ab.event_hash(e_rv, rv.doc["sessions"][other]) == _k(_k(b"SessionRevoked(bytes32,bytes32)") + sh_o + ah)
