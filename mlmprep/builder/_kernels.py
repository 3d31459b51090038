"""Numba kernels for the masking stage: arrays in, arrays out, no validation (mlmprep.builder.mask does that).

Randomness: every row gets its own SplitMix64 stream whose start is `stream_key(seed, global row)`,
a bijective hash of the seed and the row index. Nothing is shared between rows, so the bytes do not
depend on how rows are chunked or how many threads run. Rows are processed in blocks of BLOCK_ROWS so
that per-row scratch is allocated once per block; the block size never changes the output.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros  # LLVM cttz
from numba.extending import intrinsic, register_jitable

from mlmprep.builder import randomness
from mlmprep.builder.randomness import GOLDEN
from mlmprep.format.rows import IGNORE

BLOCK_ROWS = 32  # rows per parallel work item: amortises scratch allocation, keeps 2+ threads balanced

U32 = np.uint64(32)
LOW32 = np.uint64(0xFFFFFFFF)
ONE = np.uint64(1)
TWO32 = np.uint64(1 << 32)
CHUNK = 16  # tokens per overshooting copy step: 64 bytes, one AVX-512 or two AVX2 moves


# ---------------------------------------------------------------------------- counter-based generator


# randomness.mix64 and randomness.stream_key (plain NumPy, so the driver hashes seeds without Numba), compiled into
# the kernels that call them. Numba's cache keys on this file only: they are frozen, as every build's bytes hang on
# them.
mix64 = register_jitable(inline="always")(randomness.mix64)
stream_key = register_jitable(inline="always")(randomness.stream_key)


@njit(cache=True, nogil=True)
def warm_up():
    """A serial kernel that loads from the cache in a fraction of a second: calling it initialises Numba's
    compiler (most of that second), so a process can do that once and then fork workers that have it."""
    return stream_key(np.uint64(0), np.uint64(0))


@njit(cache=True, nogil=True, inline="always")
def _bounded(state, n):
    """(new state, uniform int64 in [0, n)) for 1 <= n <= 2**32; exact (Lemire's multiply-shift + rejection)."""
    nn = np.uint64(n)
    while True:
        state += GOLDEN
        m = (mix64(state) >> U32) * nn  # high 32 bits of the draw times n
        low = m & LOW32
        if low >= nn or low >= (TWO32 - nn) % nn:  # the second test runs with probability < n / 2**32
            return state, np.int64(m >> U32)


@njit(cache=True, nogil=True, inline="always")
def _floyd_step(state, n, k, q, bits):
    """Step q of Floyd's sampling of k distinct ints from [0, n): one draw, one more bit set in `bits`."""
    j = n - k + q
    state, t = _bounded(state, j + 1)
    taken = (bits[t >> 6] >> np.uint64(t & 63)) & ONE
    t = j if taken else t  # t taken: Floyd takes j instead, which no earlier step could have taken
    bits[t >> 6] |= ONE << np.uint64(t & 63)
    return state


@njit(cache=True, nogil=True, inline="always")
def _read_bits(bits, n, out):
    """The set bits among the first n of the bitmap, in increasing order, into out."""
    c = 0
    for w in range((n + 63) >> 6):
        word = bits[w]
        while word:
            out[c] = (w << 6) + np.int64(trailing_zeros(word))
            c += 1
            word &= word - ONE


@njit(cache=True, nogil=True, inline="always")
def _sorted_sample(state, n, k, bits, out):
    """k distinct ints from [0, n), uniformly (Floyd: k draws), sorted into out[:k]; `bits` holds >= n bits."""
    bits[: (n + 63) >> 6] = 0
    for q in range(k):
        state = _floyd_step(state, n, k, q, bits)
    _read_bits(bits, n, out)
    return state


@njit(cache=True, nogil=True, inline="always")
def _sorted_sample_pair(state, n_a, n_b, k, bits_a, bits_b, out_a, out_b):
    """_sorted_sample from [0, n_a) and from [0, n_b), stepped together so that the two chains of
    bitmap reads and writes overlap in the CPU (a quarter faster than one after the other)."""
    bits_a[: (n_a + 63) >> 6] = 0
    bits_b[: (n_b + 63) >> 6] = 0
    for q in range(k):
        state = _floyd_step(state, n_a, k, q, bits_a)
        state = _floyd_step(state, n_b, k, q, bits_b)
    _read_bits(bits_a, n_a, out_a)
    _read_bits(bits_b, n_b, out_b)
    return state


# ---------------------------------------------------------------------------- span corruption


@intrinsic
def _copy_chunk(typingctx, dst, at, src, start):
    """dst[at:at + CHUNK] = src[start:start + CHUNK] as one fixed-size memcpy (a single vector move), unchecked."""

    if dst.dtype != src.dtype:
        return None

    def codegen(context, builder, sig, args):
        dst_arr = context.make_array(sig.args[0])(context, builder, args[0])
        src_arr = context.make_array(sig.args[2])(context, builder, args[2])
        to = cgutils.gep(builder, dst_arr.data, args[1])
        frm = cgutils.gep(builder, src_arr.data, args[3])
        itemsize = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        cgutils.raw_memcpy(builder, to, frm, context.get_constant(types.intp, CHUNK), itemsize)
        return context.get_dummy_value()

    return types.void(dst, at, src, start), codegen


@njit(cache=True, nogil=True, inline="always")
def _copy(src, start, dst, at, n, min_chunks):
    """dst[at:at + n] = src[start:start + n] in whole CHUNK-token moves, at least min_chunks of them,
    where both arrays have room (else exactly).

    Spans are short and of random length, so an exact loop mispredicts its exit on nearly every span,
    and a fixed first min_chunks moves never do; overshooting is harmless because a row is written
    left to right and the next span overwrites it.
    """
    padded = max(min_chunks * CHUNK, (n + CHUNK - 1) // CHUNK * CHUNK)
    if at + padded <= dst.size and start + padded <= src.size:
        for c in range(0, min_chunks * CHUNK, CHUNK):
            _copy_chunk(dst, at + c, src, start + c)
        for c in range(min_chunks * CHUNK, padded, CHUNK):
            _copy_chunk(dst, at + c, src, start + c)
    else:
        for q in range(n):
            dst[at + q] = src[start + q]


@njit(cache=True, nogil=True, inline="always")
def corrupt_with_spans(tokens, span_lengths, starts_with_noise, sentinels, eos_id, enc_out, label_out):
    """Apply one segmentation: span_lengths alternate kept/noise, the first noise iff starts_with_noise.

    Noise span k becomes sentinels[k] in enc_out and `sentinels[k] + its tokens` in label_out; both end
    with eos_id. Toy example: tokens 1..13, spans [3, 1, 6, 3] -> enc [1 2 3 E0 5 6 7 8 9 10 E1 </s>],
    labels [E0 4 E1 11 12 13 </s>]. Returns the lengths written (enc, labels).
    """
    pos, e, lab, k = 0, 0, 0, 0
    noise = starts_with_noise
    for n in span_lengths:
        if noise:
            enc_out[e] = sentinels[k]
            label_out[lab] = sentinels[k]
            _copy(tokens, pos, label_out, lab + 1, n, 1)  # noise spans: ~3 tokens at T5's settings
            e += 1
            lab += n + 1
            k += 1
        else:
            _copy(tokens, pos, enc_out, e, n, 2)  # kept spans: ~17 tokens
            e += n
        pos += n
        noise = not noise
    enc_out[e] = eos_id
    label_out[lab] = eos_id
    return e + 1, lab + 1


@njit(cache=True, nogil=True, inline="always")
def _interleave(keep_cuts, noise_cuts, n_keep, n_noise, n_spans, spans):
    """spans[:2s] = kept part 0, noise part 0, kept part 1, ...; parts are bounded by the sorted cuts (+1)."""
    prev_keep, prev_noise = 0, 0
    for k in range(n_spans):
        end_keep = keep_cuts[k] + 1 if k < n_spans - 1 else n_keep
        end_noise = noise_cuts[k] + 1 if k < n_spans - 1 else n_noise
        spans[2 * k] = end_keep - prev_keep
        spans[2 * k + 1] = end_noise - prev_noise
        prev_keep, prev_noise = end_keep, end_noise


@njit(cache=True, nogil=True, inline="always")
def _roll(spans, n_seg, offset, out):
    """Rotate the segmentation spans[:n_seg] (kept first) to begin at token `offset`, into out.

    An offset inside a noise span moves back to that span's start (noise spans are never split); an
    offset inside a kept span splits it, its head wrapping to the end. Returns (segments, starts_with_noise).
    """
    j, start = 0, 0
    while start + spans[j] <= offset:
        start += spans[j]
        j += 1
    head = offset - start if j % 2 == 0 else 0  # tokens of kept span j that wrap to the end
    for q in range(n_seg):
        out[q] = spans[(j + q) % n_seg]
    out[0] -= head
    if head > 0:
        out[n_seg] = head
        return n_seg + 1, False
    return n_seg, j % 2 == 1


@njit(cache=True, nogil=True, inline="always")
def _span_sizes(offsets, num_spans):
    """(most spans in a row, 64-bit words in a bitmap of the longest row, blocks of BLOCK_ROWS rows): the sizes of
    the per-block scratch of _segment."""
    n_rows = offsets.size - 1
    max_spans = max(1, num_spans.max()) if n_rows > 0 else 1
    n_words = ((offsets[1:] - offsets[:-1]).max() + 63) >> 6 if n_rows > 0 else 0
    return max_spans, n_words, (n_rows + BLOCK_ROWS - 1) // BLOCK_ROWS


@njit(cache=True, nogil=True, inline="always")
def _span_scratch(max_spans, n_words):
    """One block's scratch for _segment: a bitmap and sorted cuts for the kept tokens and for the noise, and the
    spans (2 per noise span, one more for a roll's split)."""
    return (np.empty(n_words, np.uint64), np.empty(n_words, np.uint64), np.empty(max_spans, np.int64),
            np.empty(max_spans, np.int64), np.empty(2 * max_spans + 1, np.int64))


@njit(cache=True, nogil=True, inline="always")
def _segment(state, length, n_noise, s, scratch):
    """T5's random segmentation of a row of `length` tokens, n_noise of them noise in s spans: s - 1 sorted cut
    points among the kept tokens and s - 1 among the noise (Floyd's sampling), interleaved kept-first into the
    scratch's spans[:2s]. Returns (state, spans)."""
    keep_bits, noise_bits, keep_cuts, noise_cuts, spans = scratch
    state = _sorted_sample_pair(state, length - n_noise - 1, n_noise - 1, s - 1, keep_bits, noise_bits, keep_cuts,
                                noise_cuts)
    _interleave(keep_cuts, noise_cuts, length - n_noise, n_noise, s, spans)
    return state, spans


@njit(cache=True, nogil=True, parallel=True)
def span_corrupt_rows(values, offsets, num_noise, num_spans, seed, first_row, sentinels, eos_id, random_roll,
                      enc_offsets, label_offsets, enc_values, label_values):
    """Span-corrupt every row of (values, offsets) into the preallocated enc_/label_ arrays.

    Per row: _segment, optionally rolled by a uniform offset, then written by corrupt_with_spans.
    """
    n_rows = offsets.size - 1
    max_spans, n_words, n_blocks = _span_sizes(offsets, num_spans)
    for b in prange(n_blocks):
        scratch = _span_scratch(max_spans, n_words)
        rolled = np.empty(2 * max_spans + 1, np.int64)
        for i in range(b * BLOCK_ROWS, min(n_rows, (b + 1) * BLOCK_ROWS)):
            length = offsets[i + 1] - offsets[i]
            s = num_spans[i]
            state, segments = _segment(stream_key(seed, first_row + i), length, num_noise[i], s, scratch)
            n_seg, noise_first = 2 * s, False
            if random_roll:
                state, offset = _bounded(state, length)
                n_seg, noise_first = _roll(segments, 2 * s, offset, rolled)
                segments = rolled
            corrupt_with_spans(
                values[offsets[i]:offsets[i + 1]], segments[:n_seg], noise_first, sentinels, eos_id,
                enc_values[enc_offsets[i]:enc_offsets[i + 1]], label_values[label_offsets[i]:label_offsets[i + 1]],
            )


@njit(cache=True, nogil=True, parallel=True)
def ul2_rows(values, offsets, kinds, num_noise, num_spans, modes, seed, first_row, sentinels, eos_id, enc_offsets,
             label_offsets, enc_values, label_values):
    """Denoise every row of (values, offsets) by its own denoiser into the preallocated enc_/label_ arrays.

    modes[i] (>= 0) is written first in the encoder input. kinds[i] 0, a span denoiser: num_noise[i] noise tokens
    in num_spans[i] spans, drawn as span_corrupt_rows draws them (no roll); a row of one token (no spans) stays
    whole, its labels EOS alone. kinds[i] 1, the prefix LM: the last num_noise[i] tokens are the target, the rest
    the input, each ending with EOS.
    """
    n_rows = offsets.size - 1
    max_spans, n_words, n_blocks = _span_sizes(offsets, num_spans)
    for b in prange(n_blocks):
        scratch = _span_scratch(max_spans, n_words)
        for i in range(b * BLOCK_ROWS, min(n_rows, (b + 1) * BLOCK_ROWS)):
            length = offsets[i + 1] - offsets[i]
            tokens = values[offsets[i]:offsets[i + 1]]
            e0 = enc_offsets[i]
            if modes[i] >= 0:
                enc_values[e0] = modes[i]
                e0 += 1
            enc = enc_values[e0:enc_offsets[i + 1]]
            labels = label_values[label_offsets[i]:label_offsets[i + 1]]
            n_noise, s = num_noise[i], num_spans[i]
            if kinds[i] == 1:
                p = length - n_noise
                enc[:p] = tokens[:p]
                enc[p] = eos_id
                labels[:n_noise] = tokens[p:]
                labels[n_noise] = eos_id
            elif s == 0:
                enc[:length] = tokens
                enc[length] = eos_id
                labels[0] = eos_id
            else:
                _, spans = _segment(stream_key(seed, first_row + i), length, n_noise, s, scratch)
                corrupt_with_spans(tokens, spans[:2 * s], False, sentinels, eos_id, enc, labels)


# ---------------------------------------------------------------------------- masked diffusion (MDLM)


@njit(cache=True, nogil=True, inline="always")
def _unit(state):
    """(new state, uniform float64 in [0, 1)): the top 53 bits of the next draw."""
    state += GOLDEN
    return state, np.float64(mix64(state) >> np.uint64(11)) * 2.0 ** -53


@njit(cache=True, nogil=True, parallel=True)
def mdlm_rows(values, offsets, seed, first_row, floor, mask_id, is_special, inputs_out, labels_out, rates_out):
    """MDLM's forward process per row: a rate t = float32(floor + (1 - floor) * (1 - u)) in (floor, 1] from the
    row's stream, then each non-special token becomes mask_id with probability t (a draw u < t), its label the
    original; every other label IGNORE."""
    n_rows = offsets.size - 1
    for i in prange(n_rows):
        lo, hi = offsets[i], offsets[i + 1]
        state = stream_key(seed, first_row + i)
        state, u = _unit(state)
        t = np.float32(floor + (1.0 - floor) * (1.0 - u))
        rates_out[i] = t
        t64 = np.float64(t)
        for p in range(lo, hi):
            token = values[p]
            inputs_out[p] = token
            labels_out[p] = IGNORE
            if not is_special[token]:
                state, u = _unit(state)
                if u < t64:
                    inputs_out[p] = mask_id
                    labels_out[p] = token


# ---------------------------------------------------------------------------- BERT-style MLM


@njit(cache=True, nogil=True, inline="always")
def _groups(tokens, is_special, word_starts, whole_word, starts, lengths):
    """Group a row's maskable (non-special) positions into words (whole_word) or single tokens; returns the count.

    A word is a start token plus the non-start tokens after it; a special token ends a word.
    """
    n_groups, prev_maskable = 0, False
    for p in range(tokens.size):
        t = tokens[p]
        if is_special[t]:
            prev_maskable = False
            continue
        if whole_word and prev_maskable and not word_starts[t]:
            lengths[n_groups - 1] += 1
        else:
            starts[n_groups] = p
            lengths[n_groups] = 1
            n_groups += 1
        prev_maskable = True
    return n_groups


@njit(cache=True, nogil=True, inline="always")
def _choose_words(state, lengths, n_groups, m, chosen):
    """Words in a random order (lazy Fisher-Yates), each taken while the count stays <= m; if none fits,
    the first one drawn. Writes the taken word indices to chosen[:n]; returns (state, n)."""
    for g in range(n_groups):
        chosen[g] = g
    n_chosen, count = 0, 0
    for g in range(n_groups):
        if count == m:
            break
        state, r = _bounded(state, n_groups - g)
        chosen[g], chosen[g + r] = chosen[g + r], chosen[g]
        if count + lengths[chosen[g]] <= m:
            count += lengths[chosen[g]]
            chosen[n_chosen] = chosen[g]  # n_chosen <= g: overwrites an already drawn slot
            n_chosen += 1
    return state, max(n_chosen, 1)  # nothing fit: chosen[0] is still the first word drawn


@njit(cache=True, nogil=True, inline="always")
def _mask_position(state, p, tokens, mask_id, normal_ids, inputs_out, labels_out):
    """BERT's 80/10/10 at position p: the label keeps the original; the input becomes mask, random or itself."""
    labels_out[p] = tokens[p]
    state, r = _bounded(state, 10)
    if r < 8:
        inputs_out[p] = mask_id
    elif r == 8:
        state, q = _bounded(state, normal_ids.size)
        inputs_out[p] = normal_ids[q]
    return state


@njit(cache=True, nogil=True, parallel=True)
def mlm_rows(values, offsets, counts, seed, first_row, mask_id, is_special, normal_ids, word_starts, whole_word,
             inputs_out, labels_out):
    """Mask counts[i] maskable tokens of row i (BERT 80/10/10), or whole words up to that count.

    Tokens: counts[i] distinct maskable positions by Floyd's sampling. Whole words: _choose_words.
    """
    n_rows = offsets.size - 1
    max_len = (offsets[1:] - offsets[:-1]).max() if n_rows > 0 else 0
    n_blocks = (n_rows + BLOCK_ROWS - 1) // BLOCK_ROWS
    for b in prange(n_blocks):
        bits = np.empty((max_len + 63) >> 6, np.uint64)
        starts = np.empty(max_len, np.int64)
        lengths = np.empty(max_len, np.int64)
        chosen = np.empty(max_len, np.int64)
        for i in range(b * BLOCK_ROWS, min(n_rows, (b + 1) * BLOCK_ROWS)):
            lo, hi = offsets[i], offsets[i + 1]
            tokens, inputs, labels = values[lo:hi], inputs_out[lo:hi], labels_out[lo:hi]
            inputs[:] = tokens
            labels[:] = IGNORE
            if counts[i] == 0:
                continue
            n_groups = _groups(tokens, is_special, word_starts, whole_word, starts, lengths)
            state = stream_key(seed, first_row + i)
            if whole_word:
                state, n_chosen = _choose_words(state, lengths, n_groups, counts[i], chosen)
            else:
                state = _sorted_sample(state, n_groups, counts[i], bits, chosen)
                n_chosen = counts[i]
            for c in range(n_chosen):
                g = chosen[c]
                for p in range(starts[g], starts[g] + lengths[g]):
                    state = _mask_position(state, p, tokens, mask_id, normal_ids, inputs, labels)


# ---------------------------------------------------------------------------- checks (mlmprep.builder.verify)


@njit(cache=True, nogil=True, inline="always")
def _slot(t, first, step, n_sentinels):
    """k if token t is <extra_id_k> (ids first + k * step, k < n_sentinels), else -1."""
    d = t - first
    if d % step != 0 or not 0 <= d // step < n_sentinels:
        return -1
    return d // step


@njit(cache=True, nogil=True, inline="always")
def _span_row_problem(window, enc, labels, n_noise, n_spans, first, step, n_sentinels, eos_id):
    """0 if (enc, labels) is a span corruption of window with these counts, else the first problem's code
    (1 encoder length, 2 label length, 3 missing EOS, 4 sentinels out of order, 5 does not merge back)."""
    if enc.size != window.size - n_noise + n_spans + 1:
        return 1
    if labels.size != n_noise + n_spans + 1:
        return 2
    if enc[enc.size - 1] != eos_id or labels[labels.size - 1] != eos_id:
        return 3
    pos, at, k = 0, 0, 0  # next window token, next label, next sentinel
    for e in range(enc.size - 1):
        slot = _slot(enc[e], first, step, n_sentinels)
        if slot < 0:
            if pos == window.size or window[pos] != enc[e]:
                return 5
            pos += 1
            continue
        if slot != k or _slot(labels[at], first, step, n_sentinels) != k:
            return 4
        at += 1
        while at < labels.size - 1 and _slot(labels[at], first, step, n_sentinels) < 0:
            if pos == window.size or window[pos] != labels[at]:
                return 5
            pos += 1
            at += 1
        k += 1
    if at != labels.size - 1:
        return 4
    return 0 if pos == window.size else 5


@njit(cache=True, nogil=True, parallel=True)
def check_span_rows(win_values, win_offsets, enc_values, enc_offsets, label_values, label_offsets, rows, num_noise,
                    num_spans, first_sentinel, step, n_sentinels, eos_id):
    """Per checked row (indices `rows`): 0 if its span corruption is well formed, else a problem code.

    Sentinel k has id first_sentinel + k * step (step -1 in T5's layout, +1 in others).
    """
    codes = np.zeros(rows.size, np.int8)
    for j in prange(rows.size):
        r = rows[j]
        codes[j] = _span_row_problem(
            win_values[win_offsets[r]:win_offsets[r + 1]], enc_values[enc_offsets[r]:enc_offsets[r + 1]],
            label_values[label_offsets[r]:label_offsets[r + 1]], num_noise[r], num_spans[r], first_sentinel, step,
            n_sentinels, eos_id,
        )
    return codes


@njit(cache=True, nogil=True, inline="always")
def _mlm_row_problem(window, inputs, labels, expected, whole_word, is_special):
    """0, or 1 lengths differ, 2 a label is not the window's token, 3 an unlabelled input changed,
    4 the masked count is not `expected` (whole words: only whether any token is masked), 5 a special
    token is a target."""
    if inputs.size != window.size or labels.size != window.size:
        return 1
    count = 0
    for p in range(window.size):
        if labels[p] != IGNORE:
            if labels[p] != window[p]:
                return 2
            if is_special[window[p]]:
                return 5
            count += 1
        elif inputs[p] != window[p]:
            return 3
    wrong = (count > 0) != (expected > 0) if whole_word else count != expected
    return 4 if wrong else 0


@njit(cache=True, nogil=True, parallel=True)
def check_mlm_rows(win_values, win_offsets, in_values, in_offsets, label_values, label_offsets, rows, expected,
                   whole_word, is_special):
    """Per checked row (indices `rows`): 0 if its MLM masking is well formed, else a problem code;
    is_special[id] says the id is a special token (never a target)."""
    codes = np.zeros(rows.size, np.int8)
    for j in prange(rows.size):
        r = rows[j]
        codes[j] = _mlm_row_problem(
            win_values[win_offsets[r]:win_offsets[r + 1]], in_values[in_offsets[r]:in_offsets[r + 1]],
            label_values[label_offsets[r]:label_offsets[r + 1]], expected[r], whole_word, is_special,
        )
    return codes

