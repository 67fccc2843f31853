"""The public log's pure functions (``ownmem.saihm.tlog``): Merkle hashing, stored-hash order,
inclusion and consistency proofs, signed notes and checkpoints, tiles.

Known answers come from published data, transcribed with their source named:

* the RFC 6962 test tree of Certificate Transparency (leaves "", 00, 10, 2021, 3031,
  40414243, 5051525354555657, 606162636465666768696a6b6c6d6e6f): its roots and complete-subtree
  hashes as published in github.com/transparency-dev/merkle ``testonly/constants.go``, and its
  inclusion and consistency proofs in ``cmd/proofgen/main.go`` of the same repository (CT's
  C++ ``merkle_tree_test.cc`` vectors);
* the signed-note examples of C2SP ``signed-note.md`` (example.com/foo) and of Go's
  golang.org/x/mod ``sumdb/note`` (PeterNeumann, EnochRoot; ``note.go`` and ``note_test.go``);
* the checkpoint example of C2SP ``tlog-checkpoint.md`` and the tile examples of
  C2SP ``tlog-tiles.md``.

The rest are properties (hypothesis) against an independent, literal transcription of the
RFC's MTH definition, and MUST-REJECT cases named after what they try.
"""
from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings, strategies as st

from ownmem.crypto import provider, run_sync
from ownmem.errors import MalformedInput, OwnmemError
from ownmem.saihm import notes
from ownmem.saihm.notes import (
    Checkpoint,
    NoteRefused,
    VerifierKey,
    check_checkpoint_consistency,
    open_checkpoint,
    open_note,
    parse_checkpoint,
    parse_note,
    parse_verifier_key,
)
from ownmem.saihm.tlog import (
    EMPTY_HASH,
    LogRangeError,
    ProofFailed,
    append_leaves,
    check_consistency,
    check_inclusion,
    leaf_hash,
    node_hash,
    prove_consistency,
    prove_inclusion,
    split_stored_hash_index,
    stored_hash_count,
    stored_hash_index,
    stored_hashes,
    tile_indexes,
    tile_path,
    tile_width,
    tree_hash,
)

P = provider()
h = bytes.fromhex

# ---------------------------------------------------------------- published data

# transparency-dev/merkle testonly/constants.go: LeafInputs()
LEAVES = [h(""), h("00"), h("10"), h("2021"), h("3031"), h("40414243"), h("5051525354555657"),
          h("606162636465666768696a6b6c6d6e6f")]
# ... RootHashes(), by tree size from 0
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
# ... NodeHashes(): [level][n], every complete subtree of the 8-leaf tree
NODES = [
    ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
     "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
     "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
     "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
     "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
     "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
     "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
     "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"],
    ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
     "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
     "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
     "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"],
    ["d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
     "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    ["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
]
# transparency-dev/merkle cmd/proofgen/main.go: inclusionProofs (leafIdx there is 1-based)
INCLUSION = [  # (index, size, proof)
    (0, 1, []),
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
# ... consistencyProofs
CONSISTENCY = [  # (old size, new size, proof)
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]

# C2SP signed-note.md, "Verifier keys" / "Example"
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = ("This is an example message.\n\n"
             "\u2014 example.com/foo "
             "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n")
# golang.org/x/mod sumdb/note: note.go's example and note_test.go's TestSign / TestOpen
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
PETER_TEXT = ("If you think cryptography is the answer to your problem,\n"
              "then you don't know what your problem is.\n")
PETER_SIG = ("\u2014 PeterNeumann "
             "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n")
ENOCH_SIG = ("\u2014 EnochRoot "
             "rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n")
# C2SP tlog-checkpoint.md, the example (no verifier key is published with it)
C2SP_CHECKPOINT = ("example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
                   "\u2014 example.com/behind-the-sofa "
                   "Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n")


# ---------------------------------------------------------------- an in-memory log


class Store:
    """Stored hashes in a list; it refuses reads past what a tree of ``size`` has stored,
    so a function that peeks at later leaves fails here."""

    def __init__(self) -> None:
        self.hashes: list[bytes] = []
        self.size = 0
        self.reads = 0

    def append(self, entry: bytes) -> None:
        self.hashes += stored_hashes(self.size, leaf_hash(entry), self)
        self.size += 1

    def at(self, size: int) -> Store:
        view = Store()
        view.hashes, view.size = self.hashes[:stored_hash_count(size)], size
        return view

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        self.reads += 1
        assert list(indexes) == sorted(set(indexes)), "reads come sorted, without repeats"
        assert all(0 <= i < len(self.hashes) for i in indexes), "read past the stored tree"
        return [self.hashes[i] for i in indexes]


def build(entries: Sequence[bytes]) -> Store:
    s = Store()
    for e in entries:
        s.append(e)
    return s


def mth(entries: Sequence[bytes]) -> bytes:
    """RFC 9162 "Definition of the Merkle Tree", literally: the reference the tree is held to."""
    n = len(entries)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + entries[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + mth(entries[:k]) + mth(entries[k:])).digest()


BIG = [i.to_bytes(4, "big") for i in range(300)]
BIG_STORE = build(BIG)
TEST_STORE = build(LEAVES)


# ---------------------------------------------------------------- known answers


@pytest.mark.parametrize("size", range(9))
def test_rfc6962_test_tree_roots(size: int) -> None:
    assert tree_hash(size, TEST_STORE.at(size)).hex() == ROOTS[size]


def test_rfc6962_test_tree_stored_node_hashes() -> None:
    for level, row in enumerate(NODES):
        for n, want in enumerate(row):
            assert TEST_STORE.hashes[stored_hash_index(level, n)].hex() == want
    assert len(TEST_STORE.hashes) == stored_hash_count(8) == sum(len(r) for r in NODES)


@pytest.mark.parametrize("index,size,proof", INCLUSION)
def test_published_inclusion_proofs(index: int, size: int, proof: list[str]) -> None:
    store = TEST_STORE.at(size)
    assert [x.hex() for x in prove_inclusion(size, index, store)] == proof
    check_inclusion([h(x) for x in proof], size, h(ROOTS[size]), index, leaf_hash(LEAVES[index]))


@pytest.mark.parametrize("old,new,proof", CONSISTENCY)
def test_published_consistency_proofs(old: int, new: int, proof: list[str]) -> None:
    store = TEST_STORE.at(new)
    assert [x.hex() for x in prove_consistency(old, new, store)] == proof
    check_consistency([h(x) for x in proof], old, h(ROOTS[old]), new, h(ROOTS[new]))


def test_the_leaf_and_node_prefixes_are_rfc6962s() -> None:
    assert leaf_hash(b"").hex() == ROOTS[1]
    assert node_hash(h(NODES[0][0]), h(NODES[0][1])).hex() == NODES[1][0]
    assert EMPTY_HASH.hex() == ROOTS[0]


# ---------------------------------------------------------------- storage order


def test_stored_hash_index_is_dense_and_invertible() -> None:
    seen = set()
    for size in range(1, 300):
        for level in range(size.bit_length()):
            for n in range(size >> level):
                i = stored_hash_index(level, n)
                assert split_stored_hash_index(i) == (level, n)
                seen.add(i)
    assert seen == set(range(stored_hash_count(299)))


def test_a_subtree_hash_is_stored_right_after_its_last_leaf() -> None:
    # Go's sumdb/tlog order: leaf 0 at 0, leaf 1 at 1, (1, 0) at 2, leaf 2 at 3, leaf 3 at 4, (1, 1) at 5, (2, 0) at 6
    assert [stored_hash_index(*c) for c in [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3), (1, 1), (2, 0)]] == list(range(7))


def test_a_batch_append_stores_what_one_by_one_does() -> None:
    for size, extra in [(0, 1), (0, 8), (3, 5), (7, 1), (100, 155), (255, 2)]:
        before = BIG_STORE.at(size)
        got = append_leaves(size, [leaf_hash(e) for e in BIG[size:size + extra]], before)
        assert before.hashes + got == BIG_STORE.hashes[:stored_hash_count(size + extra)]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=300))
def test_tree_hash_is_rfc_mth(size: int) -> None:
    store = BIG_STORE.at(size)
    assert tree_hash(size, store) == mth(BIG[:size])
    assert store.reads <= 1


def test_tree_head_of_a_large_log_reads_log_n_hashes() -> None:
    class Counting:
        asked: list[int] = []

        def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
            Counting.asked = list(indexes)
            return [bytes(32)] * len(indexes)

    tree_hash(100_000, Counting())
    assert len(Counting.asked) == bin(100_000).count("1")
    prove_consistency(99_000, 100_000, Counting())
    assert len(Counting.asked) <= 2 * 17


# ---------------------------------------------------------------- proofs: properties


sizes = st.integers(min_value=1, max_value=300)


@settings(max_examples=80, deadline=None)
@given(sizes, st.data())
def test_every_inclusion_proof_verifies(size: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    store = BIG_STORE.at(size)
    proof = prove_inclusion(size, index, store)
    check_inclusion(proof, size, mth(BIG[:size]), index, leaf_hash(BIG[index]))


@settings(max_examples=80, deadline=None)
@given(sizes, st.data())
def test_every_consistency_proof_verifies(new: int, data: st.DataObject) -> None:
    old = data.draw(st.integers(min_value=1, max_value=new))
    proof = prove_consistency(old, new, BIG_STORE.at(new))
    check_consistency(proof, old, mth(BIG[:old]), new, mth(BIG[:new]))


def _tampered(proof: list[bytes]) -> list[list[bytes]]:
    """Every single-bit flip, every truncation, an extra hash at either end."""
    out = []
    for i, x in enumerate(proof):
        for bit in range(256):
            y = bytearray(x)
            y[bit // 8] ^= 1 << (bit % 8)
            out.append(proof[:i] + [bytes(y)] + proof[i + 1:])
    out += [proof[:k] for k in range(len(proof))]
    out += [proof + [bytes(32)], [bytes(32)] + proof]
    return out


@settings(max_examples=25, deadline=None)
@given(sizes, st.data())
def test_every_tampered_inclusion_proof_fails(size: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    proof = prove_inclusion(size, index, BIG_STORE.at(size))
    root, leaf = mth(BIG[:size]), leaf_hash(BIG[index])
    for bad in _tampered(proof):
        with pytest.raises(ProofFailed):
            check_inclusion(bad, size, root, index, leaf)
    for bad_root in _tampered([root])[:256]:
        with pytest.raises(ProofFailed):
            check_inclusion(proof, size, bad_root[0], index, leaf)
    with pytest.raises(ProofFailed):
        check_inclusion(proof, size, root, index, leaf_hash(BIG[index] + b"x"))


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=2, max_value=300), st.data())
def test_every_tampered_consistency_proof_fails(new: int, data: st.DataObject) -> None:
    old = data.draw(st.integers(min_value=1, max_value=new - 1))
    proof = prove_consistency(old, new, BIG_STORE.at(new))
    r1, r2 = mth(BIG[:old]), mth(BIG[:new])
    for bad in _tampered(proof):
        with pytest.raises(ProofFailed):
            check_consistency(bad, old, r1, new, r2)
    with pytest.raises(ProofFailed):
        check_consistency(proof, old, r2, new, r1)               # swapped roots


@settings(max_examples=40, deadline=None)
@given(sizes, st.data())
def test_an_inclusion_proof_for_another_index_fails(size: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    proof = prove_inclusion(size, index, BIG_STORE.at(size))
    root, leaf = mth(BIG[:size]), leaf_hash(BIG[index])
    for i in {index + 1, index - 1, index ^ 1, index ^ 2, index ^ 4, size, size + index} - {index}:
        with pytest.raises(ProofFailed):
            check_inclusion(proof, size, root, i, leaf)


class Zeros:
    """Any tree, every stored hash zero: enough to learn a proof's length."""

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        return [bytes(32)] * len(indexes)


def _path_length(index: int, size: int) -> int:
    return len(prove_inclusion(size, index, Zeros()))


def _consistency_length(old: int, new: int) -> int:
    return len(prove_consistency(old, new, Zeros()))


@settings(max_examples=40, deadline=None)
@given(sizes, st.data())
def test_an_inclusion_proof_of_the_wrong_length_for_the_size_fails(size: int, data: st.DataObject) -> None:
    # A tree head binds its size: a proof may also fit another size of the same shape
    # (leaf 0 of 3 and of 4 take two hashes each), but one of another length never does.
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    proof = prove_inclusion(size, index, BIG_STORE.at(size))
    root, leaf = mth(BIG[:size]), leaf_hash(BIG[index])
    for n in {size + 1, size - 1, size * 2, size // 2, size + 64} - {size}:
        if index < n and _path_length(index, n) == len(proof):
            continue
        with pytest.raises(ProofFailed):
            check_inclusion(proof, n, root, index, leaf)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2, max_value=300), st.data())
def test_a_consistency_proof_for_other_sizes_fails(new: int, data: st.DataObject) -> None:
    old = data.draw(st.integers(min_value=1, max_value=new - 1))
    proof = prove_consistency(old, new, BIG_STORE.at(new))
    r1, r2 = mth(BIG[:old]), mth(BIG[:new])
    for o, n in {(old + 1, new), (old - 1, new), (old, new + 1), (old, new - 1), (old ^ 2, new), (old * 2, new),
                 (old, new * 2), (old // 2, new)} - {(old, new)}:
        if 0 < o < n and _consistency_length(o, n) == len(proof):
            continue
        with pytest.raises(ProofFailed):
            check_consistency(proof, o, r1, n, r2)


# ---------------------------------------------------------------- proofs: MUST-REJECT


def test_a_rewritten_entry_is_caught_by_consistency_with_an_earlier_head() -> None:
    old_root = tree_hash(100, BIG_STORE.at(100))
    forged = list(BIG)
    forged[42] = b"rewritten"
    store = build(forged)
    with pytest.raises(ProofFailed):
        check_consistency(prove_consistency(100, 300, store), 100, old_root, 300, tree_hash(300, store))


def test_a_dropped_entry_is_caught_by_consistency_with_an_earlier_head() -> None:
    old_root = tree_hash(100, BIG_STORE.at(100))
    store = build(BIG[:42] + BIG[43:])
    with pytest.raises(ProofFailed):
        check_consistency(prove_consistency(100, 299, store), 100, old_root, 299, tree_hash(299, store))


def test_a_fork_at_the_same_size_is_refused() -> None:
    with pytest.raises(ProofFailed, match="fork"):
        check_consistency([], 8, h(ROOTS[8]), 8, h(ROOTS[7]))


def test_a_consistency_proof_between_equal_sizes_must_be_empty() -> None:
    check_consistency([], 8, h(ROOTS[8]), 8, h(ROOTS[8]))
    with pytest.raises(ProofFailed):
        check_consistency([h(ROOTS[8])], 8, h(ROOTS[8]), 8, h(ROOTS[8]))


@pytest.mark.parametrize("old,new", [(0, 0), (0, 1), (5, 4), (2, 1)])
def test_consistency_from_an_empty_or_larger_tree_is_refused(old: int, new: int) -> None:
    # transparency-dev/merkle testdata/consistency/additional: "size1 is zero...", "size1 is greater than size2"
    with pytest.raises(ProofFailed):
        check_consistency([], old, EMPTY_HASH, new, EMPTY_HASH)
    with pytest.raises(LogRangeError):
        prove_consistency(old, new, BIG_STORE)


def test_an_empty_consistency_proof_between_different_sizes_fails() -> None:
    with pytest.raises(ProofFailed, match="empty"):
        check_consistency([], 2, h(ROOTS[2]), 5, h(ROOTS[5]))


@pytest.mark.parametrize("index,size", [(0, 0), (1, 1), (8, 8), (-1, 8)])
def test_an_inclusion_proof_outside_the_tree_is_refused(index: int, size: int) -> None:
    with pytest.raises(ProofFailed):
        check_inclusion([], size, h(ROOTS[1]), index, leaf_hash(b""))
    with pytest.raises(LogRangeError):
        prove_inclusion(size, index, TEST_STORE)


def test_a_proof_with_a_hash_of_the_wrong_length_is_refused() -> None:
    proof = [h(x) for x in INCLUSION[1][2]]
    with pytest.raises(ProofFailed):
        check_inclusion(proof[:2] + [proof[2] + b"\x00"], 8, h(ROOTS[8]), 0, leaf_hash(LEAVES[0]))
    with pytest.raises(ProofFailed):
        check_inclusion(proof, 8, h(ROOTS[8])[:31], 0, leaf_hash(LEAVES[0]))


def test_a_proof_longer_than_any_tree_is_refused_before_hashing() -> None:
    with pytest.raises(ProofFailed, match="longer"):
        check_inclusion([bytes(32)] * 1000, 8, h(ROOTS[8]), 0, leaf_hash(LEAVES[0]))


def test_a_lying_hash_reader_is_caught() -> None:
    class Short:
        def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
            return [bytes(32)] * (len(indexes) - 1)

    with pytest.raises(ProofFailed):
        tree_hash(5, Short())


def test_errors_are_ownmem_errors_with_stable_codes() -> None:
    assert issubclass(ProofFailed, OwnmemError) and ProofFailed.code == "log_proof_failed"
    assert issubclass(NoteRefused, OwnmemError) and NoteRefused.code == "note_refused"
    assert issubclass(LogRangeError, MalformedInput) and LogRangeError.code == "log_out_of_range"


# ---------------------------------------------------------------- signed notes: known answers


def test_c2sp_signed_note_example_verifies() -> None:
    key = parse_verifier_key(C2SP_VKEY)
    assert str(key) == C2SP_VKEY
    note = run_sync(open_note(P, C2SP_NOTE, [key]))
    assert note.text == "This is an example message.\n"
    assert [s.name for s in note.verified] == ["example.com/foo"]


def test_go_note_example_verifies_and_signing_reproduces_it() -> None:
    key = parse_verifier_key(PETER_VKEY)
    assert key.key_id == 0xC74F20A3
    note = run_sync(open_note(P, PETER_TEXT + "\n" + PETER_SIG, [key]))
    assert note.text == PETER_TEXT
    seed = base64.b64decode(PETER_SKEY.split("+", 4)[4])[1:]      # 0x01 || Ed25519 seed
    assert run_sync(notes.sign_note(P, PETER_TEXT, "PeterNeumann", seed)) == PETER_TEXT + "\n" + PETER_SIG


def test_verifier_key_id_is_sha256_of_name_newline_type_and_key() -> None:
    for vkey in (C2SP_VKEY, PETER_VKEY, ENOCH_VKEY):
        k = parse_verifier_key(vkey)
        assert VerifierKey.for_ed25519(k.name, k.public_key) == k
        assert k.key_id == int.from_bytes(
            hashlib.sha256(k.name.encode() + b"\n\x01" + k.public_key).digest()[:4], "big")


def test_a_second_signature_by_an_unknown_key_is_ignored() -> None:
    msg = PETER_TEXT + "\n" + PETER_SIG + ENOCH_SIG
    note = run_sync(open_note(P, msg, [parse_verifier_key(PETER_VKEY)]))
    assert [s.name for s in note.verified] == ["PeterNeumann"]
    assert [s.name for s in note.signatures] == ["PeterNeumann", "EnochRoot"]
    both = run_sync(open_note(P, msg, [parse_verifier_key(PETER_VKEY), parse_verifier_key(ENOCH_VKEY)]))
    assert [s.name for s in both.verified] == ["PeterNeumann", "EnochRoot"]


def test_an_unknown_signature_with_a_bad_signature_is_still_ignored() -> None:
    # note_test.go "Duplicated verified and unverified signatures": a corrupt EnochRoot line
    bad_enoch = ENOCH_SIG[:60] + "ABCD" + ENOCH_SIG[60:]
    note = run_sync(open_note(P, PETER_TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + bad_enoch,
                              [parse_verifier_key(PETER_VKEY)]))
    assert len(note.verified) == 1


def test_a_bad_signature_by_the_known_key_rejects_the_whole_note() -> None:
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(NoteRefused, match="bad signature"):
        run_sync(open_note(P, PETER_TEXT + "\n" + bad + ENOCH_SIG, [parse_verifier_key(PETER_VKEY),
                                                                  parse_verifier_key(ENOCH_VKEY)]))
    with pytest.raises(NoteRefused, match="bad signature"):
        run_sync(open_note(P, PETER_TEXT + "\n" + ENOCH_SIG + bad, [parse_verifier_key(PETER_VKEY),
                                                                  parse_verifier_key(ENOCH_VKEY)]))


def test_a_note_signed_by_no_known_key_is_refused() -> None:
    with pytest.raises(NoteRefused, match="no signature by a known key"):
        run_sync(open_note(P, PETER_TEXT + "\n" + PETER_SIG + ENOCH_SIG, []))
    with pytest.raises(NoteRefused, match="no signature by a known key"):
        run_sync(open_note(P, C2SP_NOTE, [parse_verifier_key(PETER_VKEY)]))


def test_a_signature_matching_a_known_key_by_name_or_id_only_is_ignored() -> None:
    peter = parse_verifier_key(PETER_VKEY)
    renamed = PETER_SIG.replace("PeterNeumann", "CarmenSandiego")          # id matches, name does not
    rekeyed = PETER_SIG.replace("x08g", "xxxx")                            # name matches, id does not
    for sig in (renamed, rekeyed):
        with pytest.raises(NoteRefused, match="no signature by a known key"):
            run_sync(open_note(P, PETER_TEXT + "\n" + sig, [peter]))


def test_the_signature_covers_the_text_exactly() -> None:
    key = parse_verifier_key(PETER_VKEY)
    for text in (PETER_TEXT.replace("problem", "Problem", 1), PETER_TEXT + "more\n", "x" + PETER_TEXT):
        with pytest.raises(NoteRefused, match="bad signature"):
            run_sync(open_note(P, text + "\n" + PETER_SIG, [key]))


# note_test.go TestOpen's badMsgs, and more
MALFORMED_NOTES: dict[str, bytes | str] = {
    "no_blank_line": PETER_TEXT,
    "no_signature": PETER_TEXT + "\n",
    "unterminated_signature": PETER_TEXT + "\n" + PETER_SIG[:-1],
    "control_character": "\x01" + PETER_TEXT + "\n" + PETER_SIG,
    "not_utf8": b"\xff" + (PETER_TEXT + "\n" + PETER_SIG).encode(),
    "space_in_key_name": PETER_TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Bad Name"),
    "plus_in_key_name": PETER_TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Peter+Neumann"),
    "line_without_em_dash": PETER_TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
    "hyphen_for_em_dash": PETER_TEXT + "\n" + PETER_SIG.replace("\u2014", "-"),
    "bad_base64": PETER_TEXT + "\n" + PETER_SIG.replace("x08g", "x08*"),
    "unpadded_base64": PETER_TEXT + "\n" + PETER_SIG.replace("AM=\n", "AM\n"),
    "short_signature": PETER_TEXT + "\n\u2014 PeterNeumann x08goA==\n",
    "no_name": PETER_TEXT + "\n\u2014  x08go/ZJ\n",
    "tab_in_line": PETER_TEXT + "\n" + PETER_SIG.replace(" x08g", "\tx08g"),
    "carriage_return": PETER_TEXT.replace("\n", "\r\n") + "\n" + PETER_SIG,
    "too_many_signatures": PETER_TEXT + "\n" + PETER_SIG * 101,
    "too_large": "x" * (1 << 20) + "\n\n" + PETER_SIG,
}


@pytest.mark.parametrize("name", sorted(MALFORMED_NOTES))
def test_malformed_notes_are_refused(name: str) -> None:
    with pytest.raises(NoteRefused):
        run_sync(open_note(P, MALFORMED_NOTES[name], [parse_verifier_key(PETER_VKEY)]))


def test_the_text_ends_at_the_last_blank_line() -> None:
    # C2SP: the note text MAY contain empty lines
    text = "first\n\nsecond\n"
    note = parse_note(text + "\n" + PETER_SIG)
    assert note.text == text


@pytest.mark.parametrize("vkey", [
    PETER_VKEY[:-1], PETER_VKEY + "=", PETER_VKEY.replace("c74f20a3", "c74f20a4"), PETER_VKEY.replace("+A", "+B", 1),
    PETER_VKEY.upper(), "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    # note_test.go: wrong-length key and unknown algorithm, each with an adjusted key ID
    "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
    "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
])
def test_malformed_verifier_keys_are_refused(vkey: str) -> None:
    with pytest.raises(NoteRefused):
        parse_verifier_key(vkey)


def test_two_different_keys_under_one_name_and_id_are_refused() -> None:
    peter = parse_verifier_key(PETER_VKEY)
    impostor = VerifierKey(peter.name, peter.key_id, bytes(32))
    with pytest.raises(NoteRefused, match="ambiguous"):
        run_sync(open_note(P, PETER_TEXT + "\n" + PETER_SIG, [peter, impostor]))


@settings(max_examples=30, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FFF), min_size=1, max_size=80))
def test_sign_then_open_round_trips(line: str) -> None:
    seed = hashlib.sha256(b"round trip").digest()
    text = line + "\n"
    msg = run_sync(notes.sign_note(P, text, "log.example/x", seed))
    key = VerifierKey.for_ed25519("log.example/x", run_sync(P.ed25519_public(seed)))
    assert run_sync(open_note(P, msg, [key])).text == text
    assert parse_note(msg).signatures[0].line() == msg.split("\n\n")[-1]


# ---------------------------------------------------------------- checkpoints


def test_c2sp_checkpoint_example_parses() -> None:
    note = parse_note(C2SP_CHECKPOINT)
    cp = parse_checkpoint(note.text)
    assert (cp.origin, cp.size, cp.extensions) == ("example.com/behind-the-sofa", 20852163, ())
    assert base64.b64encode(cp.root_hash).decode() == "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
    assert cp.body() == note.text


def _signed_checkpoint(cp: Checkpoint, seed: bytes = hashlib.sha256(b"log key").digest()) -> tuple[str, VerifierKey]:
    msg = run_sync(notes.sign_note(P, cp.body(), cp.origin, seed))
    return msg, VerifierKey.for_ed25519(cp.origin, run_sync(P.ed25519_public(seed)))


def test_a_checkpoint_round_trips_with_extension_lines() -> None:
    cp = Checkpoint("ownmem.example/log", 8, h(ROOTS[8]), ("ext one", "ext two"))
    msg, key = _signed_checkpoint(cp)
    assert run_sync(open_checkpoint(P, msg, key)) == cp
    assert cp.body() == f"ownmem.example/log\n8\n{base64.b64encode(h(ROOTS[8])).decode()}\next one\next two\n"


def test_a_checkpoint_for_another_origin_is_refused() -> None:
    msg, key = _signed_checkpoint(Checkpoint("ownmem.example/log", 8, h(ROOTS[8])))
    with pytest.raises(NoteRefused, match="another log"):
        run_sync(open_checkpoint(P, msg, key, origin="ownmem.example/other"))


ROOT64 = base64.b64encode(h(ROOTS[8])).decode()
MALFORMED_CHECKPOINTS = {
    "two_lines": "origin\n8\n",
    "leading_zero": f"origin\n08\n{ROOT64}\n",
    "negative_size": f"origin\n-8\n{ROOT64}\n",
    "plus_size": f"origin\n+8\n{ROOT64}\n",
    "hex_size": f"origin\n0x8\n{ROOT64}\n",
    "unicode_digit_size": f"origin\n\u0668\n{ROOT64}\n",
    "huge_size": f"origin\n{1 << 63}\n{ROOT64}\n",
    "short_root": f"origin\n8\n{base64.b64encode(h(ROOTS[8])[:31]).decode()}\n",
    "unpadded_root": f"origin\n8\n{ROOT64.rstrip('=')}\n",
    "non_canonical_root": f"origin\n8\n{ROOT64[:-2]}{'R' if ROOT64[-2] != 'R' else 'S'}=\n",
    "empty_origin": f"\n8\n{ROOT64}\n",
    "empty_extension_line": f"origin\n8\n{ROOT64}\next\n\nmore\n",
    "no_final_newline": f"origin\n8\n{ROOT64}",
}


@pytest.mark.parametrize("name", sorted(MALFORMED_CHECKPOINTS))
def test_malformed_checkpoints_are_refused(name: str) -> None:
    with pytest.raises(NoteRefused):
        parse_checkpoint(MALFORMED_CHECKPOINTS[name])


def test_the_zero_size_checkpoint_is_well_formed() -> None:
    assert parse_checkpoint(f"origin\n0\n{base64.b64encode(EMPTY_HASH).decode()}\n").size == 0


def test_checkpoint_consistency_as_a_device_runs_it() -> None:
    origin = "ownmem.example/log"
    empty = Checkpoint(origin, 0, EMPTY_HASH)
    five, eight = Checkpoint(origin, 5, h(ROOTS[5])), Checkpoint(origin, 8, h(ROOTS[8]))
    check_checkpoint_consistency(empty, eight, [])
    check_checkpoint_consistency(five, eight, prove_consistency(5, 8, TEST_STORE))
    check_checkpoint_consistency(eight, eight, [])
    with pytest.raises(ProofFailed):                      # the log shrank
        check_checkpoint_consistency(eight, five, prove_consistency(5, 8, TEST_STORE))
    with pytest.raises(ProofFailed):                      # another log
        check_checkpoint_consistency(Checkpoint("other", 5, h(ROOTS[5])), eight, prove_consistency(5, 8, TEST_STORE))
    with pytest.raises(ProofFailed):                      # an "empty" tree with a head that is not
        check_checkpoint_consistency(Checkpoint(origin, 0, h(ROOTS[1])), eight, [])


# ---------------------------------------------------------------- tiles (C2SP tlog-tiles)


def test_tile_paths_follow_c2sp() -> None:
    # tlog-tiles.md: "index 1234067 will be encoded as x001/x234/067"
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path(2, 1234067, 1) == "tile/2/x001/x234/067.p/1"
    assert tile_path(0, 0) == "tile/0/000"
    assert tile_path(1, 1000, 17) == "tile/1/x001/000.p/17"
    for bad in [(64, 0, 256), (0, -1, 256), (0, 0, 0), (0, 0, 257)]:
        with pytest.raises(LogRangeError):
            tile_path(*bad)


def test_tile_widths_of_the_c2sp_example() -> None:
    # tlog-tiles.md: size 70,000 is 273 full level 0 tiles, one of width 112, one full level 1 tile,
    # one of width 17, and one level 2 tile of width 1; size 256 is one full level 0 tile and a level 1 tile of width 1
    assert [tile_width(70_000, 0, n) for n in (0, 272, 273, 274)] == [256, 256, 112, 0]
    assert [tile_width(70_000, 1, n) for n in (0, 1, 2)] == [256, 17, 0]
    assert [tile_width(70_000, 2, n) for n in (0, 1)] == [1, 0]
    assert (tile_width(256, 0, 0), tile_width(256, 1, 0), tile_width(256, 2, 0)) == (256, 1, 0)


def test_tiles_hold_the_hashes_of_complete_subtrees() -> None:
    level0 = BIG_STORE.read_hashes(tile_indexes(0, 0, 256))
    assert level0 == [leaf_hash(e) for e in BIG[:256]]
    level1 = BIG_STORE.read_hashes(tile_indexes(1, 0, 1))
    assert level1 == [mth(BIG[:256])]
    assert tile_indexes(0, 1, 44) == [stored_hash_index(0, 256 + i) for i in range(44)]
