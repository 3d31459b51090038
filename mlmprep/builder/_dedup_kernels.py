"""Numba kernels for deduplication: arrays in, arrays out, no validation (mlmprep.builder.dedup does that).

Texts arrive as one UTF-8 buffer with int64 offsets. Words are the runs between the code points Python's
str.isspace() accepts, so the words a kernel sees are exactly `normalise(text).split(" ")` of an NFC text.
Every hash is a fixed function of the bytes (FNV-1a, then SplitMix64's finaliser): the same on every process,
machine and Python run. Each document is independent of the others, so threads never change the output.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from mlmprep.builder import randomness

BLOCK_DOCS = 64  # documents per parallel work item: amortises the shingle ring's allocation

U32 = np.uint64(32)
EMPTY = np.uint32(0xFFFFFFFF)  # every entry of a text without words: the minimum over no shingles
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
SHINGLE_TAG = np.uint64(0x5B1E_6A7E_D0C5_0001)  # starts the chain of a shingle's word hashes
BAND_TAG = np.uint64(0xBA2D_5EED_0000_0001)
WINDOW_BASE = np.uint64(0x100000001B3)  # odd: the rolling hashes of token windows and word n-grams
FILTER_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd (2**64 / the golden ratio): a key's place in a key filter

mix64 = register_jitable(inline="always")(randomness.mix64)


@njit(cache=True, nogil=True, inline="always")
def _space_at(buf, i, end):
    """Byte length of the whitespace code point starting at buf[i] (str.isspace()), or 0 if there is none."""
    c = buf[i]
    if c < 0x80:
        return 1 if (9 <= c <= 13 or 28 <= c <= 32) else 0
    if c == 0xC2 and i + 1 < end:
        d = buf[i + 1]
        return 2 if (d == 0x85 or d == 0xA0) else 0
    if i + 2 < end:
        d, e = buf[i + 1], buf[i + 2]
        if c == 0xE1:
            return 3 if (d == 0x9A and e == 0x80) else 0
        if c == 0xE2:
            if d == 0x80 and (0x80 <= e <= 0x8A or e == 0xA8 or e == 0xA9 or e == 0xAF):
                return 3
            return 3 if (d == 0x81 and e == 0x9F) else 0
        if c == 0xE3:
            return 3 if (d == 0x80 and e == 0x80) else 0
    return 0


@njit(cache=True, nogil=True, inline="always")
def _shingle(ring, count, ngram):
    """The hash of the last min(count, ngram) word hashes of the ring, oldest first (order matters)."""
    n = min(count, ngram)
    h = SHINGLE_TAG
    for j in range(count - n, count):
        h = mix64(h ^ ring[j % ngram])
    return h


@njit(cache=True, nogil=True, inline="always")
def _take_min(h, a, b, sig):
    """sig[k] = min(sig[k], permutation k of shingle hash h): multiply-shift, the top 32 bits of a_k h + b_k."""
    for k in range(sig.size):
        sig[k] = min(sig[k], np.uint32((a[k] * h + b[k]) >> U32))  # a select, not a branch: vectorises


@njit(cache=True, nogil=True, inline="always")
def _word(buf, i, end):
    """(the hash of the first word at or after buf[i], the index just past it), or (0, -1) when none is left."""
    while i < end:
        s = _space_at(buf, i, end)
        if s == 0:
            break
        i += s
    if i >= end:
        return np.uint64(0), -1
    h = FNV_OFFSET
    while i < end and _space_at(buf, i, end) == 0:
        h = (h ^ np.uint64(buf[i])) * FNV_PRIME
        i += 1
    return mix64(h), i


@njit(cache=True, nogil=True)
def _signature(buf, start, end, ngram, a, b, ring, sig):
    """MinHash signature of buf[start:end] into sig: word n-gram shingles, a shorter text as one shingle."""
    sig[:] = EMPTY
    count = 0  # words seen
    i = start
    while i < end:
        h, i = _word(buf, i, end)
        if i < 0:
            break
        ring[count % ngram] = h
        count += 1
        if count >= ngram:
            _take_min(_shingle(ring, count, ngram), a, b, sig)
    if 0 < count < ngram:
        _take_min(_shingle(ring, count, ngram), a, b, sig)


@njit(cache=True, nogil=True)
def word_hashes(buf, offsets, keep, out, counts):
    """The hash of every word of every kept text (buf[offsets[i]:offsets[i + 1]] where keep[i]; the others have
    none) into out, one after another, and each text's words into counts; returns the words in all. out needs room
    for len(buf) // 2 + 1 words. The words and hashes of _word, in one pass over the bytes with ASCII tested inline."""
    k = 0
    for d in range(offsets.size - 1):
        if not keep[d]:
            counts[d] = 0
            continue
        first, i, end = k, offsets[d], offsets[d + 1]
        h, inside = FNV_OFFSET, False
        while i < end:
            c = buf[i]
            s = (1 if c <= 32 and (c >= 28 or 9 <= c <= 13) else 0) if c < 0x80 else _space_at(buf, i, end)
            if s == 0:
                h = (h ^ np.uint64(c)) * FNV_PRIME
                inside = True
                i += 1
                continue
            if inside:
                out[k] = mix64(h)
                k += 1
                h, inside = FNV_OFFSET, False
            i += s
        if inside:
            out[k] = mix64(h)
            k += 1
        counts[d] = k - first
    return k


@njit(cache=True, nogil=True)
def shingle_hashes(words, counts, ngram, starts, out, whole):
    """out[starts[i]:starts[i + 1]] = the hashes of text i's word n-grams in order (a text of fewer words: with
    `whole`, one hash of them all, else none), from its word hashes (words, counts: word_hashes): a polynomial of
    the word hashes mod 2**64 rolled along (one step per word, whatever `ngram`), then SplitMix64's finaliser, so a
    whole text of k words hashes as its k-gram does."""
    top = np.uint64(1)  # WINDOW_BASE ** (ngram - 1)
    for _ in range(ngram - 1):
        top *= WINDOW_BASE
    at = 0
    for d in range(counts.size):
        k, h = starts[d], np.uint64(0)
        for j in range(counts[d]):
            if j >= ngram:
                h -= words[at + j - ngram] * top
            h = h * WINDOW_BASE + words[at + j]
            if j + 1 >= ngram:
                out[k] = mix64(h ^ SHINGLE_TAG)
                k += 1
        if whole and 0 < counts[d] < ngram:
            out[k] = mix64(h ^ SHINGLE_TAG)
        at += counts[d]


@njit(cache=True, nogil=True)
def window_hashes(ids, lengths, keep, k, starts, out):
    """out[starts[d]:starts[d + 1]] = a hash of each run of k consecutive tokens of each kept document d (ids: the
    documents' tokens one after another), in order: a polynomial hash mod 2**64 rolled along, then SplitMix64's
    finaliser."""
    top = np.uint64(1)  # WINDOW_BASE ** (k - 1)
    for _ in range(k - 1):
        top *= WINDOW_BASE
    at = 0
    for d in range(lengths.size):
        n, h, w = lengths[d], np.uint64(0), starts[d]
        if not keep[d]:
            at += n
            continue
        for j in range(n):
            if j >= k:
                h -= np.uint64(ids[at + j - k] + 1) * top
            h = h * WINDOW_BASE + np.uint64(ids[at + j] + 1)
            if j >= k - 1:
                out[w] = mix64(h)
                w += 1
        at += n


@njit(cache=True, nogil=True)
def first_seen(hashes, starts, table, used):
    """For each run hashes[starts[p]:starts[p + 1]], in order: how many of its entries some earlier run held
    (int64 [runs]); each run's entries join the table after it is counted, so a run's own repeats are not "seen".
    table: uint64 open addressing (0: empty; a hash of 0 is stored as 1), at most half full at the end (the caller
    sizes it); used[0]: its entries."""
    mask = np.uint64(table.size - 1)
    seen = np.zeros(starts.size - 1, np.int64)
    for p in range(starts.size - 1):
        for i in range(starts[p], starts[p + 1]):
            if _slot(table, max(hashes[i], np.uint64(1)), mask) < 0:
                seen[p] += 1
        for i in range(starts[p], starts[p + 1]):
            h = max(hashes[i], np.uint64(1))
            j = _slot(table, h, mask)
            if j >= 0:
                table[j] = h
                used[0] += 1
    return seen


@njit(cache=True, nogil=True, inline="always")
def _slot(table, h, mask):
    """The empty slot where h would go (linear probing), or -1 when the table holds h."""
    j = h & mask  # the hashes are SplitMix64 outputs: their low bits are as good as any
    while table[j] != 0:
        if table[j] == h:
            return -1
        j = (j + np.uint64(1)) & mask
    return np.int64(j)


@njit(cache=True, nogil=True)
def rehash(table, bigger):
    """Every entry of table into the empty table `bigger` (a power of two in size)."""
    mask = np.uint64(bigger.size - 1)
    for h in table:
        if h != 0:
            bigger[_slot(bigger, h, mask)] = h


@njit(cache=True, nogil=True, parallel=True)
def signatures(buf, offsets, ngram, a, b, out):
    """out[i] = the signature of document i, buf[offsets[i]:offsets[i + 1]]; blocks of documents in parallel."""
    n = offsets.size - 1
    for block in prange((n + BLOCK_DOCS - 1) // BLOCK_DOCS):
        ring = np.empty(ngram, np.uint64)
        for i in range(block * BLOCK_DOCS, min(n, (block + 1) * BLOCK_DOCS)):
            _signature(buf, offsets[i], offsets[i + 1], ngram, a, b, ring, out[i])


@njit(cache=True, nogil=True, inline="always")
def _row_key(sig, i, lo, hi, tag):
    """A uint64 hash of sig[i, lo:hi]: FNV-1a over the 32-bit entries, then SplitMix64's finaliser, so that the
    top bits spread evenly."""
    h = FNV_OFFSET ^ tag
    for k in range(lo, hi):
        h = (h ^ np.uint64(sig[i, k])) * FNV_PRIME
    return mix64(h)


@njit(cache=True, nogil=True)
def lsh_keys(sig, bands, rows):
    """uint64 [bands + 1, n]: row 0 the key of each whole signature, row 1 + j that of its band j (entries
    j * rows to (j + 1) * rows); one pass over each signature, on one thread (the driver runs it as each shard
    comes in, beside the workers still reading)."""
    n, k = sig.shape
    keys = np.empty((bands + 1, n), np.uint64)
    for i in range(n):
        keys[0, i] = _row_key(sig, i, 0, k, np.uint64(k))
        for j in range(bands):
            keys[1 + j, i] = _row_key(sig, i, j * rows, (j + 1) * rows, BAND_TAG + np.uint64(j))
    return keys


@njit(cache=True, nogil=True)
def bucket_bits(size):
    """Bits of the key that pick a bucket: about four keys per bucket, so the counts stay in cache."""
    bits = 1
    while (4 << bits) < size:
        bits += 1
    return bits


@njit(cache=True, nogil=True)
def bucket_into(keys, docs, bits, starts, order):
    """A counting sort of docs by the top `bits` of keys[docs]: bucket j holds the positions (in docs)
    order[starts[j]:starts[j + 1]], increasing. Equal keys share a bucket. starts must come zeroed."""
    shift = np.uint64(64 - bits)
    for i in range(docs.size):
        starts[np.int64(keys[docs[i]] >> shift) + 1] += 1
    for j in range(starts.size - 1):
        starts[j + 1] += starts[j]
    fill = starts[:-1].copy()
    for i in range(docs.size):
        j = np.int64(keys[docs[i]] >> shift)
        order[fill[j]] = i
        fill[j] += 1


@njit(cache=True, nogil=True, inline="always")
def _find(parent, x):
    """The root of x, halving the path on the way."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=True, nogil=True, inline="always")
def _union(parent, x, y):
    """Join the sets of x and y under the smaller root, so that every root is its set's smallest index."""
    rx, ry = _find(parent, x), _find(parent, y)
    if rx < ry:
        parent[ry] = rx
    elif ry < rx:
        parent[rx] = ry


@njit(cache=True, nogil=True, inline="always")
def _equal(sig, x, y):
    for k in range(sig.shape[1]):
        if sig[x, k] != sig[y, k]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _close(sig, x, y, threshold):
    """Whether the share of equal entries of rows x and y (the Jaccard estimate) is at least threshold."""
    same = 0
    for k in range(sig.shape[1]):
        same += sig[x, k] == sig[y, k]
    return same / sig.shape[1] >= threshold


@njit(cache=True, nogil=True)
def link_identical(sig, keys, parent):
    """Union the rows of equal signature (keys: their whole-row hashes); a row found equal to an earlier one is
    not compared again, so a bucket of m copies costs m comparisons, not m**2 / 2."""
    everyone = np.arange(keys.size)
    bits = bucket_bits(keys.size)
    starts = np.zeros((1 << bits) + 1, np.int32)
    order = np.empty(keys.size, np.int32)
    bucket_into(keys, everyone, bits, starts, order)
    joined = np.zeros(keys.size, np.bool_)
    for j in range(starts.size - 1):
        for u in range(starts[j], starts[j + 1]):
            x = order[u]
            if joined[x]:
                continue
            for v in range(u + 1, starts[j + 1]):
                y = order[v]
                if not joined[y] and keys[x] == keys[y] and _equal(sig, x, y):
                    _union(parent, x, y)
                    joined[y] = True


@njit(cache=True, nogil=True)
def link_band(sig, docs, keys, starts, order, threshold, parent):
    """Union every pair of docs whose band keys (keys, indexed by document) are equal and whose estimate reaches
    threshold; starts and order bucket docs by key (bucket_into). One thread: the driver's clustering runs beside
    the build's workers, and parallel regions' spinning threads only slow it there.

    Pairs already in one set are skipped before their signatures are compared. Two different bands share a 64-bit
    key with probability 2**-64, and such a pair still has to pass the threshold."""
    for j in range(starts.size - 1):
        for u in range(starts[j], starts[j + 1]):
            x = docs[order[u]]
            for v in range(u + 1, starts[j + 1]):
                y = docs[order[v]]
                if keys[x] == keys[y] and _find(parent, x) != _find(parent, y) and _close(sig, x, y, threshold):
                    _union(parent, x, y)


@njit(cache=True, nogil=True)
def roots(parent):
    """The root (smallest index) of every element's set."""
    out = np.empty(parent.size, np.int64)
    for i in range(parent.size):
        out[i] = _find(parent, i)
    return out


@njit(cache=True, nogil=True, inline="always")
def _joined(parent, x, y, edges, e):
    """Union x and y; when that joined two sets, edge e is (x, y) and e + 1 is returned, else e."""
    rx, ry = _find(parent, x), _find(parent, y)
    if rx == ry:
        return e
    parent[max(rx, ry)] = min(rx, ry)
    edges[0, e], edges[1, e] = x, y
    return e + 1


@njit(cache=True, nogil=True)
def link_groups(starts, members, sig, threshold, parent, edges):
    """A partition's share of near_duplicate_clusters: group g holds the rows members[starts[g]:starts[g + 1]]
    (increasing) of one (band, band key); every pair of a group that reaches threshold is linked, as link_band
    does, rows of identical signature first (a group of m copies costs m comparisons). Writes the links that
    joined two sets, a spanning forest of the partition's edges, into edges[:, :e]; returns e."""
    e = 0
    k = np.uint64(sig.shape[1])
    for g in range(starts.size - 1):
        lo, m = starts[g], starts[g + 1] - starts[g]
        whole = np.empty(m, np.uint64)
        for u in range(m):
            whole[u] = _row_key(sig, members[lo + u], 0, sig.shape[1], k)
        order = np.argsort(whole, kind="mergesort")  # ties keep corpus order
        reps = np.empty(m, np.int64)
        r, u = 0, 0
        while u < m:
            x = members[lo + order[u]]
            reps[r] = x
            r += 1
            v = u + 1
            while v < m and whole[order[v]] == whole[order[u]]:
                y = members[lo + order[v]]
                if _equal(sig, x, y):
                    e = _joined(parent, x, y, edges, e)
                else:  # equal keys of different signatures (2**-64): compared as any other pair
                    reps[r] = y
                    r += 1
                v += 1
            u = v
        for a in range(r):
            for b in range(a + 1, r):
                x, y = reps[a], reps[b]
                if _find(parent, x) != _find(parent, y) and _close(sig, x, y, threshold):
                    e = _joined(parent, x, y, edges, e)
    return e


@njit(cache=True, nogil=True)
def join_pairs(a, b, parent):
    """Union a[i] and b[i] for every i: the driver's join of the partitions' links."""
    for i in range(a.size):
        _union(parent, a[i], b[i])


@njit(cache=True, nogil=True, inline="always")
def _partition(key, parts):
    """floor(top 32 bits of key x parts / 2**32): dedup_partitions.partition_of for one key."""
    return np.int64(((key >> U32) * np.uint64(parts)) >> U32)


@njit(cache=True, nogil=True)
def bucket_records(keys, refs, parts, offsets, out_keys, out_refs):
    """A counting sort of records (keys[i], and refs[i] unless refs is empty) by the partition of their key, stable:
    out_keys (and out_refs) hold partition 0's records in order, then 1's, ...; offsets [parts + 1] where each
    starts. Two passes over the keys, no comparison sort."""
    offsets[:] = 0
    for i in range(keys.size):
        offsets[_partition(keys[i], parts) + 1] += 1
    for p in range(parts):
        offsets[p + 1] += offsets[p]
    at = offsets[:-1].copy()
    for i in range(keys.size):
        p = _partition(keys[i], parts)
        out_keys[at[p]] = keys[i]
        if refs.size:
            out_refs[at[p]] = refs[i]
        at[p] += 1


@njit(cache=True, nogil=True)
def _filter_shift(bits):
    """How far a key's product with FILTER_MULTIPLIER is shifted to give its place among the 64 * bits.size (a power
    of two) bits of a key filter."""
    width = 0
    while (np.uint64(1) << np.uint64(width)) < np.uint64(64 * bits.size):
        width += 1
    return np.uint64(64 - width)


@njit(cache=True, nogil=True)
def key_slots(keys, table, slots, bits):
    """Insert every key into `table` (uint64 open addressing, a power of two in size, 0: empty; linear probing,
    at most half full: the caller sizes it) and note each one's slot in `slots`; the key 0 has slot table.size.
    Each key also sets its bit of `bits` (uint64 words, a power of two of them), the filter mark_found tests first."""
    mask = np.uint64(table.size - 1)
    shift = _filter_shift(bits)
    for i in range(keys.size):
        h = keys[i]
        if h == 0:
            slots[i] = table.size
            continue
        b = (h * FILTER_MULTIPLIER) >> shift
        bits[b >> np.uint64(6)] |= np.uint64(1) << (b & np.uint64(63))
        j = h & mask  # the keys are SplitMix64 outputs: their low bits are as good as any
        while table[j] != 0 and table[j] != h:
            j = (j + np.uint64(1)) & mask
        table[j] = h
        slots[i] = np.int64(j)


@njit(cache=True, nogil=True)
def mark_found(keys, table, found, bits):
    """found[slot] = True for the slot of every key of `keys` that `table` holds (key_slots); the others are let
    be. A key whose bit of `bits` (key_slots') is clear is not in the table: most of them, tested in a filter of
    32 bits or more per key that stays in cache, where the table's probes would miss it."""
    mask = np.uint64(table.size - 1)
    shift = _filter_shift(bits)
    for h in keys:
        if h == 0:
            found[table.size] = True
            continue
        b = (h * FILTER_MULTIPLIER) >> shift
        if (bits[b >> np.uint64(6)] >> (b & np.uint64(63))) & np.uint64(1) == 0:
            continue
        j = h & mask
        while table[j] != 0:
            if table[j] == h:
                found[j] = True
                break
            j = (j + np.uint64(1)) & mask
