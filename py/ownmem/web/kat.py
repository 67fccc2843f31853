"""The crypto provider's known-answer tests (RFC 8032, 7748, 5869, 3394, NIST GCM, FIPS 204
properties): published constants, run by the self-test whatever vectors it is given."""
from __future__ import annotations

from typing import Any

from ownmem.crypto import CryptoProvider, run_sync
from ownmem.errors import MalformedInput
from ownmem.web.checks import Check, h, ok as _ok, raises as _raises, refusal as _refusal, refused as _refused

# ---------------------------------------------------------------- provider known answers

def kat_checks(p: CryptoProvider) -> dict[str, Check]:
    rs = run_sync
    ed = [
        ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
         "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
         "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
         "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
         "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ]
    alice = h("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    alice_pub = h("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    bob = h("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
    bob_pub = h("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    kw_kek = h("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
    kw_key = h("00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f")
    kw_wrapped = h("28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21")
    gk, gn = bytes(range(32)), bytes(range(12))
    seed, ctx, msg = bytes(range(32)), b"ownmem-test", b"a message worth signing"

    def ed25519() -> None:
        for s, pub, m, sig in ed:
            _ok(rs(p.ed25519_public(h(s))).hex() == pub, "public")
            _ok(rs(p.ed25519_sign(h(s), h(m))).hex() == sig, "signature")
            _ok(rs(p.ed25519_verify(h(pub), h(sig), h(m))) is True, "verify")

    def ed25519_says_no() -> None:
        _, pub, _, sig = ed[0]
        bad = bytearray(h(sig))
        bad[0] ^= 1
        _ok(rs(p.ed25519_verify(h(pub), bytes(bad), b"")) is False)
        _ok(rs(p.ed25519_verify(h(pub), h(sig), b"x")) is False)
        _ok(rs(p.ed25519_verify(h(pub), h(sig)[:63], b"")) is False)
        _ok(rs(p.ed25519_verify(h(pub)[:31], h(sig), b"")) is False)
        _ok(rs(p.ed25519_verify(h(ed[1][1]), h(sig), b"")) is False)
        _raises(MalformedInput, lambda: rs(p.ed25519_public(bytes(31))), "short seed")

    def x25519() -> None:
        _ok(rs(p.x25519_public(alice)) == alice_pub and rs(p.x25519_public(bob)) == bob_pub, "publics")
        shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        _ok(rs(p.x25519_shared(alice, bob_pub)).hex() == shared == rs(p.x25519_shared(bob, alice_pub)).hex())
        scalar = h("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4")
        u = h("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")
        _ok(rs(p.x25519_shared(scalar, u)).hex()
            == "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552", "RFC 7748 5.2")

    def x25519_refusals() -> None:
        for peer in ("00" * 32, "01" + "00" * 31,
                     "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"):
            with _refusal(f"low-order {peer[:4]}"):
                rs(p.x25519_shared(alice, h(peer)))
        _refused(lambda: rs(p.x25519_shared(alice, bob_pub[:31])), "short peer")

    def hkdf() -> None:
        okm = rs(p.hkdf_sha256(b"\x0b" * 22, h("f0f1f2f3f4f5f6f7f8f9"), 42, h("000102030405060708090a0b0c")))
        _ok(okm.hex() == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        okm = rs(p.hkdf_sha256(b"\x0b" * 22, b"", 42))
        _ok(okm.hex() == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        _ok(rs(p.hkdf_sha256(b"\x0b" * 22, b"", 42, b"")) == okm, "empty salt == no salt")

    def aes_kw() -> None:
        _ok(rs(p.aes_kw_wrap(kw_kek, kw_key)) == kw_wrapped, "wrap")
        _ok(rs(p.aes_kw_unwrap(kw_kek, kw_wrapped)) == kw_key, "unwrap")

    def aes_kw_refusals() -> None:
        for i in (0, 7, 8, 20, 39):
            bad = bytearray(kw_wrapped)
            bad[i] ^= 1
            with _refusal(f"tampered byte {i}"):
                rs(p.aes_kw_unwrap(kw_kek, bytes(bad)))
        for kek, w in ((bytes(32), kw_wrapped), (kw_kek, kw_wrapped[:-8]), (kw_kek, kw_wrapped[:-1]),
                       (kw_kek, b"")):
            with _refusal("wrong kek or shape"):
                rs(p.aes_kw_unwrap(kek, w))

    def aes_gcm() -> None:
        key, iv = bytes(32), bytes(12)
        _ok(rs(p.aes_gcm_encrypt(key, iv, b"", b"")).hex() == "530f8afbc74536b9a963b4f1c4cb738b", "TC13")
        ct = rs(p.aes_gcm_encrypt(key, iv, bytes(16), b""))
        _ok(ct.hex() == "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919", "TC14")
        _ok(rs(p.aes_gcm_decrypt(key, iv, ct, b"")) == bytes(16), "TC14 decrypt")

    def aes_gcm_refusals() -> None:
        ct = rs(p.aes_gcm_encrypt(gk, gn, b"a memory", b"aad"))
        for bit in (0, 7, 35, 64, 191):
            bad = bytearray(ct)
            bad[bit // 8] ^= 1 << (bit % 8)
            with _refusal(f"bit {bit}"):
                rs(p.aes_gcm_decrypt(gk, gn, bytes(bad), b"aad"))
        for key, iv, c, aad in ((gk, gn, ct, b"AAD"), (gk, gn, ct, b""), (bytes(32), gn, ct, b"aad"),
                                (gk, bytes(12), ct, b"aad"), (gk, gn, b"", b"aad"),
                                (gk, gn, bytes(15), b"aad"), (gk[:16], gn, ct, b"aad"),
                                (gk, gn[:8], ct, b"aad")):
            with _refusal("wrong input"):
                rs(p.aes_gcm_decrypt(key, iv, c, aad))

    def mldsa_keygen() -> None:
        pub = rs(p.mldsa65_public(seed))
        _ok(len(pub) == 1952 and rs(p.mldsa65_public(seed)) == pub, "deterministic keygen")
        _ok(rs(p.mldsa65_public(bytes(32))) != pub, "seed matters")
        _raises(MalformedInput, lambda: rs(p.mldsa65_public(bytes(31))), "short seed")

    def mldsa_hedged() -> None:
        pub = rs(p.mldsa65_public(seed))
        a, b = rs(p.mldsa65_sign(seed, msg, ctx)), rs(p.mldsa65_sign(seed, msg, ctx))
        _ok(len(a) == 3309 and a != b, "hedged: fresh randomness")
        _ok(rs(p.mldsa65_verify(pub, msg, a, ctx)) and rs(p.mldsa65_verify(pub, msg, b, ctx)), "verify")

    def mldsa_deterministic() -> None:
        pub = rs(p.mldsa65_public(seed))
        a = rs(p.mldsa65_sign(seed, msg, ctx, deterministic=True))
        _ok(a == rs(p.mldsa65_sign(seed, msg, ctx, deterministic=True)) and len(a) == 3309, "repeatable")
        _ok(rs(p.mldsa65_verify(pub, msg, a, ctx)), "verify")
        _ok(rs(p.mldsa65_sign(seed, msg, b"other", deterministic=True)) != a, "context changes it")

    def mldsa_refusals() -> None:
        pub = rs(p.mldsa65_public(seed))
        det = rs(p.mldsa65_sign(seed, msg, ctx, deterministic=True))
        sig = rs(p.mldsa65_sign(seed, msg, ctx))
        for s in (det, sig):
            _ok(not rs(p.mldsa65_verify(pub, msg, s, b"other-context")), "other context")
            _ok(not rs(p.mldsa65_verify(pub, msg, s, b"")), "empty context")
        flipped = bytearray(sig)
        flipped[100] ^= 1
        _ok(not rs(p.mldsa65_verify(pub, msg, bytes(flipped), ctx)), "flipped")
        _ok(not rs(p.mldsa65_verify(pub, msg + b"!", sig, ctx)), "message")
        _ok(not rs(p.mldsa65_verify(pub, msg, sig[:-1], ctx)), "short signature")
        _ok(not rs(p.mldsa65_verify(pub[:-1], msg, sig, ctx)), "short key")
        _ok(not rs(p.mldsa65_verify(rs(p.mldsa65_public(bytes(32))), msg, sig, ctx)), "other key")
        _ok(not rs(p.mldsa65_verify(pub, msg, sig, b"x" * 256)), "context > 255 bytes")

    checks: dict[str, Check] = {
        "kat.ed25519_rfc8032": ed25519, "kat.ed25519_says_no": ed25519_says_no,
        "kat.x25519_rfc7748": x25519, "kat.x25519_refusals": x25519_refusals,
        "kat.hkdf_rfc5869": hkdf, "kat.aes_kw_rfc3394": aes_kw, "kat.aes_kw_refusals": aes_kw_refusals,
        "kat.aes_gcm_nist": aes_gcm, "kat.aes_gcm_refusals": aes_gcm_refusals,
        "kat.mldsa65_keygen": mldsa_keygen, "kat.mldsa65_hedged": mldsa_hedged,
        "kat.mldsa65_deterministic": mldsa_deterministic, "kat.mldsa65_refusals": mldsa_refusals,
    }
    checks.update(batch_checks(p, kw_kek, kw_key, kw_wrapped, ed[0]))
    return checks


def batch_checks(p: Any, kek: bytes, key: bytes, wrapped: bytes, ed: tuple[str, ...]) -> dict[str, Check]:
    """The batch forms answer exactly what the single calls answer, failures as None / False."""
    rs = run_sync

    def kw_many() -> None:
        bad = bytes([wrapped[0] ^ 1]) + wrapped[1:]
        _ok(rs(p.aes_kw_unwrap_many(kek, [wrapped, bad, b"", wrapped])) == [key, None, None, key])
        _ok(rs(p.aes_kw_unwrap_many(kek, [])) == [])

    def gcm_many() -> None:
        k, n = bytes(range(32)), bytes(range(12))
        ct = rs(p.aes_gcm_encrypt(k, n, b"one", b"a"))
        got = rs(p.aes_gcm_decrypt_many([k, k, bytes(32), k[:16]], [n, n, n, n], [ct, ct, ct, ct],
                                        [b"a", b"b", b"a", b"a"]))
        _ok(got == [b"one", None, None, None])

    def ed_many() -> None:
        _, pub, m, sig = (h(x) for x in ed)
        got = rs(p.ed25519_verify_many([pub, pub, pub[:31], pub], [sig, sig, sig, sig[:63]],
                                       [m, b"x", m, m]))
        _ok(got == [True, False, False, False])

    return {"batch.aes_kw_unwrap_many": kw_many, "batch.aes_gcm_decrypt_many": gcm_many,
            "batch.ed25519_verify_many": ed_many}


