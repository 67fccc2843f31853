"""The public log's verifiable structure (DESIGN.md "The public log"; SAIHM "Audit log").

Pure functions over hashes: no I/O, no clock, no key but the ones passed in.

Merkle tree (RFC 9162 "Merkle Trees", the hashing of RFC 6962):

    leaf_hash(entry) = SHA-256(0x00 || entry)                 entry: a receipt's CBOR bytes
    node_hash(l, r)  = SHA-256(0x01 || l || r)
    MTH({})          = SHA-256("")
    MTH(D[0:n])      = node_hash(MTH(D[0:k]), MTH(D[k:n])),   k the largest power of 2 < n

Storage: every complete subtree's hash is stored once, at a dense index that grows
with the log (Crosby and Wallach's order, the one of Go's sumdb/tlog):

    stored_hash_index(level, n)   the hash of leaves [n * 2**level, (n + 1) * 2**level)

Appending leaf n stores its leaf hash and the hashes of the subtrees it completes
(``stored_hashes``: two a leaf on average).  Any tree head, inclusion proof or
consistency proof is then one ``HashReader.read_hashes`` call of O(log n) stored
hashes: never a walk over the leaves.

Proofs: ``prove_inclusion``/``check_inclusion`` (RFC 9162 "Merkle Inclusion Proofs")
and ``prove_consistency``/``check_consistency`` ("Merkle Consistency Proofs"); the
checks follow the RFC's verification steps one for one.

Checkpoints (the signed tree heads, C2SP signed notes) are ``ownmem.saihm.notes``.  Tiles
(C2SP tlog-tiles): ``tile_path`` and ``tile_indexes`` map the 256-wide tiles onto the
stored hashes.

What a checkpoint proves: that the holder of the log key said "the log had these n
entries".  It authenticates the server's view only; a server that rewrites or forks
history can sign the new view as well.  What catches that is a device that kept an
earlier checkpoint and checks the new one is consistent with it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ownmem.crypto.interface import sha256
from ownmem.errors import MalformedInput, OwnmemError

HASH_SIZE = 32
EMPTY_HASH = sha256(b"")            # MTH of the empty tree
MAX_TREE_SIZE = (1 << 63) - 1       # sizes and indexes are 64-bit integers on every backend
TILE_HEIGHT = 8                     # C2SP tlog-tiles: 256 hashes a full tile
TILE_WIDTH = 1 << TILE_HEIGHT


class ProofFailed(OwnmemError):
    """A Merkle proof does not show what it claims: the log is not the one you checked before.

    Keep the checkpoint you had and report the server; never replace it with this one."""

    code = "log_proof_failed"


class LogRangeError(MalformedInput):
    """A size or index outside the tree asked about (a proof for leaf 9 of a 5-leaf tree)."""

    code = "log_out_of_range"


# ---------------------------------------------------------------- hashing


def leaf_hash(entry: bytes) -> bytes:
    return sha256(b"\x00" + entry)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


# ---------------------------------------------------------------- storage order


def stored_hash_index(level: int, n: int) -> int:
    """Where the hash of the ``n``-th complete subtree of height ``level`` is stored.

    Level ``L``'s ``n``-th hash is stored right after level ``L-1``'s ``2n+1``-th, which is
    stored right after the leaf it completes: so a subtree's hash follows its last leaf."""
    if level < 0 or n < 0:
        raise LogRangeError("negative level or index")
    leaf = ((n + 1) << level) - 1              # the last leaf of that subtree
    i, m = 0, leaf
    while m > 0:                               # leaf hashes stored before: leaf + leaf/2 + leaf/4 + ...
        i += m
        m >>= 1
    return i + level


def split_stored_hash_index(index: int) -> tuple[int, int]:
    """The inverse of ``stored_hash_index``: (level, n)."""
    if index < 0:
        raise LogRangeError("negative stored hash index")
    # stored_hash_index(0, n) <= 2n, so the leaf that stored it is at or after index // 2
    n = index // 2
    at = stored_hash_index(0, n)
    while True:
        following = at + 1 + _trailing_ones(n)   # the first index of leaf n + 1
        if following > index:
            break
        n, at = n + 1, following
    level = index - at
    return level, n >> level


def stored_hash_count(size: int) -> int:
    """How many hashes a tree of ``size`` leaves has stored."""
    if size == 0:
        return 0
    return stored_hash_index(0, size - 1) + 1 + _trailing_ones(size - 1)


class HashReader(Protocol):
    """Storage behind the tree: the stored hashes at the given indexes, in that order.

    Every function here makes one call; indexes come sorted where they can be."""

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]: ...


def stored_hashes(n: int, leaf: bytes, reader: HashReader) -> list[bytes]:
    """The hashes to store, from ``stored_hash_index(0, n)`` on, when appending leaf ``n``
    with leaf hash ``leaf``: that hash, then each subtree leaf ``n`` completes."""
    _check_hash(leaf)
    m = _trailing_ones(n)
    # the left siblings of the subtrees completed, highest first (sorted indexes)
    indexes = [stored_hash_index(level, (n >> level) - 1) for level in reversed(range(m))]
    old = _read(reader, indexes)
    out = [leaf]
    h = leaf
    for sibling in reversed(old):
        h = node_hash(sibling, h)
        out.append(h)
    return out


def append_leaves(size: int, leaves: Sequence[bytes], reader: HashReader) -> list[bytes]:
    """The hashes to store, from ``stored_hash_count(size)`` on, when appending ``leaves``
    (leaf hashes) to a tree of ``size``: a batch, where later leaves read what earlier
    ones of the same batch computed."""
    overlay = _Overlay(reader, stored_hash_count(size))
    for i, leaf in enumerate(leaves):
        overlay.pending.extend(stored_hashes(size + i, leaf, overlay))
    return overlay.pending


class _Overlay:
    """The stored hashes with the ones of a batch not yet written laid over them."""

    def __init__(self, reader: HashReader, base: int) -> None:
        self.reader, self.base = reader, base
        self.pending: list[bytes] = []          # pending[i] is stored hash base + i

    def read_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        old = [i for i in indexes if i < self.base]
        got = dict(zip(old, _read(self.reader, old), strict=True))
        return [got[i] if i < self.base else self.pending[i - self.base] for i in indexes]


# ---------------------------------------------------------------- tree heads


def tree_hash(size: int, reader: HashReader) -> bytes:
    """MTH of the first ``size`` leaves: one read of at most 1 + log2(size) stored hashes."""
    _check_size(size)
    if size == 0:
        return EMPTY_HASH
    return _range_hashes([(0, size)], reader)[0]


def _subtrees(lo: int, hi: int) -> list[tuple[int, int]]:
    """The complete subtrees (level, n) whose hashes make MTH(D[lo:hi]), left to right.

    Every range a proof asks for starts at a multiple of the smallest power of 2 >= its
    width, so it splits into aligned complete subtrees of decreasing size."""
    out = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        assert lo & ((1 << level) - 1) == 0, "unaligned range"
        out.append((level, lo >> level))
        lo += 1 << level
    return out


def _range_hashes(ranges: Sequence[tuple[int, int]], reader: HashReader) -> list[bytes]:
    """MTH(D[lo:hi]) for each range, from one read."""
    parts = [_subtrees(lo, hi) for lo, hi in ranges]
    indexes = [stored_hash_index(level, n) for p in parts for level, n in p]
    wanted = sorted(set(indexes))                   # one sorted read; storage answers in any order it likes
    got = dict(zip(wanted, _read(reader, wanted), strict=True))
    hashes = [got[i] for i in indexes]
    out, at = [], 0
    for p in parts:
        chunk = hashes[at:at + len(p)]
        at += len(p)
        h = chunk[-1]
        for left in reversed(chunk[:-1]):           # MTH folds from the right
            h = node_hash(left, h)
        out.append(h)
    return out


# ---------------------------------------------------------------- inclusion proofs


def prove_inclusion(size: int, index: int, reader: HashReader) -> list[bytes]:
    """PATH(index, D[0:size]) of RFC 9162 "Generating an Inclusion Proof", leaf side first."""
    _check_size(size)
    if not 0 <= index < size:
        raise LogRangeError(f"leaf {index} is not in a tree of {size}")
    ranges: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:                        # PATH(m, D[0:k]) : MTH(D[k:n])
            ranges.append((lo + k, hi))
            hi = lo + k
        else:                                     # PATH(m - k, D[k:n]) : MTH(D[0:k])
            ranges.append((lo, lo + k))
            lo += k
    ranges.reverse()
    return _range_hashes(ranges, reader) if ranges else []


def check_inclusion(proof: Sequence[bytes], size: int, root: bytes, index: int, leaf: bytes) -> None:
    """RFC 9162 "Verifying an Inclusion Proof": raise ``ProofFailed`` unless ``proof`` shows
    that the tree of ``size`` leaves with head ``root`` has leaf hash ``leaf`` at ``index``."""
    _check_hashes(proof, root, leaf)
    # 1. leaf_index must be inside the tree
    if not (0 <= index < size <= MAX_TREE_SIZE):
        raise ProofFailed(f"leaf {index} is not in a tree of {size}")
    # 2. fn = leaf_index, sn = tree_size - 1
    fn, sn = index, size - 1
    # 3. r = hash
    r = leaf
    # 4. for each p in inclusion_path
    for p in proof:
        # a. a path longer than the tree is high fails
        if sn == 0:
            raise ProofFailed("inclusion proof too long")
        # b. p is a left sibling if fn is a right child or the last node of its level
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            fn, sn = _climb_right_edge(fn, sn)
        else:
            r = node_hash(r, p)
        # c. one level up
        fn >>= 1
        sn >>= 1
    # 5. the path must reach the root, and the root must match
    if sn != 0:
        raise ProofFailed("inclusion proof too short")
    if r != root:
        raise ProofFailed("inclusion proof does not lead to the tree head")


# ---------------------------------------------------------------- consistency proofs


def prove_consistency(old_size: int, new_size: int, reader: HashReader) -> list[bytes]:
    """PROOF(old_size, D[0:new_size]) of RFC 9162 "Generating a Consistency Proof"
    (SUBPROOF with b = true); empty when the sizes are equal."""
    _check_size(new_size)
    if not 0 < old_size <= new_size:
        raise LogRangeError(f"no consistency proof from {old_size} to {new_size}")
    m = old_size
    ranges: list[tuple[int, int]] = []
    lo, hi, whole = 0, new_size, True             # whole: b, "the old tree is this subtree's left edge"
    while m != hi:
        k = _split(hi - lo)
        if m - lo <= k:                           # SUBPROOF(m, D[0:k], b) : MTH(D[k:n])
            ranges.append((lo + k, hi))
            hi = lo + k
        else:                                     # SUBPROOF(m - k, D[k:n], false) : MTH(D[0:k])
            ranges.append((lo, lo + k))
            lo += k
            whole = False
    if not whole:                                 # SUBPROOF(m, D[m], false) = [MTH(D[m])]
        ranges.append((lo, hi))
    ranges.reverse()
    return _range_hashes(ranges, reader) if ranges else []


def check_consistency(proof: Sequence[bytes], old_size: int, old_root: bytes, new_size: int,
                      new_root: bytes) -> None:
    """RFC 9162 "Verifying Consistency between Two Tree Heads": raise ``ProofFailed`` unless
    ``proof`` shows that the tree (``new_size``, ``new_root``) extends (``old_size``, ``old_root``).

    Equal sizes need an empty proof and equal roots.  An empty old tree is consistent
    with everything and has no proof: ``check_checkpoint_consistency`` accepts it, this refuses."""
    _check_hashes(proof, old_root, new_root)
    if not (0 < old_size <= new_size <= MAX_TREE_SIZE):
        raise ProofFailed(f"no consistency proof from {old_size} to {new_size}")
    if old_size == new_size:
        if proof:
            raise ProofFailed("consistency proof between equal sizes must be empty")
        if old_root != new_root:
            raise ProofFailed("two different heads for one tree size: a fork")
        return
    path = list(proof)
    # 1. an empty consistency_path fails
    if not path:
        raise ProofFailed("empty consistency proof")
    # 2. if first is an exact power of 2, prepend first_hash
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    # 3. fn = first - 1, sn = second - 1
    fn, sn = old_size - 1, new_size - 1
    # 4. skip the levels where the old tree's last node is a right child
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5. fr = sr = the first value
    fr = sr = path[0]
    # 6. for each subsequent value c
    for c in path[1:]:
        # a. a proof longer than the tree is high fails
        if sn == 0:
            raise ProofFailed("consistency proof too long")
        # b. c is a left sibling: it enters both trees
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            fn, sn = _climb_right_edge(fn, sn)
        else:                                     # a right sibling: only in the new tree
            sr = node_hash(sr, c)
        # c. one level up
        fn >>= 1
        sn >>= 1
    # 7. both heads must come out, and the path must have reached the new root
    if sn != 0:
        raise ProofFailed("consistency proof too short")
    if fr != old_root:
        raise ProofFailed("consistency proof does not lead to the old tree head")
    if sr != new_root:
        raise ProofFailed("consistency proof does not lead to the new tree head")


# ---------------------------------------------------------------- tiles (C2SP tlog-tiles)


def tile_path(level: int, n: int, width: int = TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``, ``N`` in 3-digit elements, all but the last with an ``x``."""
    if not 0 <= level <= 63 or n < 0 or not 1 <= width <= TILE_WIDTH:
        raise LogRangeError("no such tile")
    digits = f"{n:d}"
    digits = "0" * (-len(digits) % 3) + digits
    elems = [digits[i:i + 3] for i in range(0, len(digits), 3)]
    path = "/".join(["x" + e for e in elems[:-1]] + [elems[-1]])
    return f"tile/{level}/{path}" + (f".p/{width}" if width < TILE_WIDTH else "")


def tile_indexes(level: int, n: int, width: int) -> list[int]:
    """The stored hashes that make tile (``level``, ``n``) of ``width`` hashes: hash ``i`` is
    MTH(D[(n*256 + i) * 256**level : (n*256 + i + 1) * 256**level]), a complete subtree."""
    if not 0 <= level <= 63 or n < 0 or not 1 <= width <= TILE_WIDTH:
        raise LogRangeError("no such tile")
    return [stored_hash_index(TILE_HEIGHT * level, n * TILE_WIDTH + i) for i in range(width)]


def tile_width(size: int, level: int, n: int) -> int:
    """How many hashes tile (``level``, ``n``) has in a tree of ``size``: 0 if none yet."""
    full = size >> (TILE_HEIGHT * level)             # complete subtrees at that height
    return max(0, min(TILE_WIDTH, full - n * TILE_WIDTH))


# ---------------------------------------------------------------- helpers


def _split(n: int) -> int:
    """k, the largest power of 2 smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def _climb_right_edge(fn: int, sn: int) -> tuple[int, int]:
    """RFC 9162: "if LSB(fn) is not set, then right-shift both fn and sn equally until either
    LSB(fn) is set or fn is 0" (the levels where the node is the last of its level and has
    no sibling to its right)."""
    while fn & 1 == 0 and fn != 0:
        fn >>= 1
        sn >>= 1
    return fn, sn


def _trailing_ones(n: int) -> int:
    return ((n ^ (n + 1)).bit_length()) - 1


def _read(reader: HashReader, indexes: list[int]) -> list[bytes]:
    if not indexes:
        return []
    hashes = reader.read_hashes(indexes)
    if len(hashes) != len(indexes) or any(len(h) != HASH_SIZE for h in hashes):
        raise ProofFailed("hash storage answered the wrong number or size of hashes")
    return [bytes(h) for h in hashes]


def _check_size(size: int) -> None:
    if not 0 <= size <= MAX_TREE_SIZE:
        raise LogRangeError("tree size out of range")


def _check_hash(h: bytes) -> None:
    if not isinstance(h, bytes) or len(h) != HASH_SIZE:
        raise ProofFailed("a hash is 32 bytes")


def _check_hashes(proof: Sequence[bytes], *heads: bytes) -> None:
    if len(proof) > 2 * 64:
        raise ProofFailed("proof longer than any tree is high")
    for h in (*proof, *heads):
        _check_hash(h)
