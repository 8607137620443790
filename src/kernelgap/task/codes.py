"""Binary codes for witness families (docs/experiments.md).

* **Hadamard codes.** A normalized Hadamard matrix ``H`` of order ``m`` (first
  row and column all ``+1``, ``H Hᵀ = m I``) gives ``m − 1`` codewords: rows
  ``2..m`` with ``+1 → 1`` and ``−1 → 0``.  Each has weight ``m/2`` and any two
  overlap in exactly ``m/4`` positions.  Orders ``2^a·(q + 1)`` are built, with
  ``q`` a prime ``≡ 3 (mod 4)`` (Paley I) or ``q + 1 = 1`` (pure Sylvester),
  doubled ``a`` times by Sylvester's ``[[H, H], [H, −H]]``.
* **Constant-weight codes** of weight ``w`` whose pairwise overlaps are at most
  a cap ``λ``: greedy (lexicographic) or seeded random.  Two such words are at
  Hamming distance ``2(w − t) ≥ 2(w − λ)`` when they overlap in ``t`` positions,
  so no code has more than the Johnson bound :func:`johnson_bound` of words;
  both searches refuse a larger count before drawing anything, and stop as soon
  as the words left to scan or draw cannot reach it.

Every code is verified before it is returned (a violated property is a bug); a code too large
to check is refused in one line rather than checked for hours.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np

from ..errors import FamilyError
from ..limits import MAX_GRAM_CHECK_WORDS, MAX_SUBWORD_KEYS, check_memory
from .packed import as_packed, shared_subword, subword_key_count


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % d for d in range(2, int(q**0.5) + 1))


def paley_matrix(q: int) -> np.ndarray:
    """Paley I Hadamard matrix of order ``q + 1`` for a prime ``q ≡ 3 (mod 4)``.

    ``H = I + S`` with ``S = [[0, 1ᵀ], [−1, Q]]`` and ``Q[i, j] = χ(j − i)`` the
    Jacobsthal matrix (χ the Legendre symbol mod q).
    """
    if not (_is_prime(q) and q % 4 == 3):
        raise FamilyError(f"Paley construction needs a prime q ≡ 3 (mod 4), got {q}")
    squares = {(k * k) % q for k in range(1, q)}
    chi = np.array([0] + [1 if k in squares else -1 for k in range(1, q)], dtype=np.int64)
    diff = (np.arange(q)[None, :] - np.arange(q)[:, None]) % q
    s = np.zeros((q + 1, q + 1), dtype=np.int64)
    s[0, 1:] = 1
    s[1:, 0] = -1
    s[1:, 1:] = chi[diff]
    return np.eye(q + 1, dtype=np.int64) + s


def hadamard_orders(lo: int, hi: int) -> list[int]:
    """Orders in ``[lo, hi]`` that :func:`hadamard_matrix` builds."""
    return [m for m in range(max(lo, 1), hi + 1) if _hadamard_recipe(m) is not None]


def _hadamard_recipe(order: int) -> tuple[int, int] | None:
    """``(base, doublings)`` with base 1 or a Paley order, or None."""
    doublings, base = 0, order
    while True:
        if base == 1 or (base % 4 == 0 and _is_prime(base - 1) and (base - 1) % 4 == 3):
            return base, doublings
        if base % 2:
            return None
        base, doublings = base // 2, doublings + 1


def hadamard_matrix_bytes(order: int) -> int:
    """Memory of :func:`hadamard_matrix`: about six ``order × order`` int64 / float64 arrays."""
    return 50 * order * order


def hadamard_matrix(order: int) -> np.ndarray:
    """A normalized Hadamard matrix of the given order (verified ``H Hᵀ = m I``), refused first
    past the memory limit."""
    check_memory(f"a Hadamard matrix of order {order:,}", hadamard_matrix_bytes(order), FamilyError)
    recipe = _hadamard_recipe(order)
    if recipe is None:
        raise FamilyError(
            f"no Hadamard construction for order {order}: orders 2^a·(q+1) with q prime ≡ 3 mod 4"
            f" are built (e.g. {', '.join(map(str, hadamard_orders(max(1, order - 8), order + 8)))})"
        )
    base, doublings = recipe
    h = np.ones((1, 1), dtype=np.int64) if base == 1 else paley_matrix(base - 1)
    for _ in range(doublings):
        h = np.block([[h, h], [h, -h]])  # Sylvester doubling
    h = h * h[:, :1]  # rows, then columns, sign-flipped: first column and row all +1
    h = h * h[:1, :]
    f = h.astype(np.float64)  # ±1 entries: every sum of products is an integer ≤ order < 2^53, exact
    if not np.array_equal(f @ f.T, order * np.eye(order)):
        raise AssertionError(f"Hadamard construction of order {order} is wrong")
    return h


def hadamard_code(order: int) -> np.ndarray:
    """The ``order − 1`` codewords of a normalized Hadamard matrix, ``uint8 [m−1, m]`` (module
    docstring; verified); needs ``4 | m``."""
    if order < 4 or order % 4:
        raise FamilyError(f"a Hadamard code needs an order divisible by 4 and ≥ 4, got {order}")
    code = (hadamard_matrix(order)[1:] > 0).astype(np.uint8)
    check_constant_weight(code, order // 2, order // 4, exact_overlap=True)
    return code


#: Codes up to this many words are checked with their Gram matrix (all n² overlaps).
GRAM_WORDS = 4096
#: Cells (rows × words) of one chunk of a Gram check, to bound its memory (128 MiB of float64).
GRAM_CHUNK_CELLS = 1 << 24


def _gram_pairs(code: np.ndarray, bad) -> tuple[int, int] | None:
    """The first pair ``i < j`` of rows whose overlap satisfies ``bad(overlaps)``, in row chunks
    (float64 products of 0/1 rows: sums ≤ m < 2⁵³ are exact, and BLAS is fast)."""
    c = code.astype(np.float64)
    n = len(c)
    step = max(1, GRAM_CHUNK_CELLS // max(n, 1))
    for start in range(0, n, step):
        block = c[start : start + step] @ c.T
        rows = np.arange(start, start + len(block))
        hit = bad(block) & (np.arange(n)[None, :] > rows[:, None])
        if hit.any():
            i, j = np.argwhere(hit)[0].tolist()
            return start + i, j
    return None


def _subword_removed(words: int, m: int, weight: int, max_overlap: int) -> int | None:
    """The removed-subset size of the sub-word test for a code this large, None for the Gram check."""
    if words <= GRAM_WORDS or m > 64 or not 0 <= max_overlap < weight:
        return None
    removed = weight - max_overlap - 1
    return removed if subword_key_count(words, weight, removed) <= MAX_SUBWORD_KEYS else None


def check_constant_weight(code: np.ndarray, weight: int, max_overlap: int, exact_overlap: bool = False) -> None:
    """Raise ``AssertionError`` unless every word has ``weight`` and overlaps ≤ the cap
    (``== cap`` with ``exact_overlap``): by the chunked Gram matrix up to :data:`GRAM_WORDS`
    words or with ``exact_overlap``, else by sorted sub-word keys (:func:`~.packed.shared_subword`:
    an overlap above the cap is a shared ``(cap + 1)``-subset) where they are few enough, else
    by the Gram matrix up to :data:`~kernelgap.limits.MAX_GRAM_CHECK_WORDS` words; a larger
    check is refused (:class:`FamilyError`)."""
    if not (code.sum(1) == weight).all():
        raise AssertionError(f"a codeword does not have weight {weight}")
    if max_overlap >= weight and not exact_overlap:
        return  # no two words of weight w overlap in more than w positions
    n, m = code.shape
    removed = None if exact_overlap else _subword_removed(n, m, weight, max_overlap)
    if removed is not None:
        bad_pair = shared_subword(code, weight, removed)
    elif n > MAX_GRAM_CHECK_WORDS:
        raise FamilyError(
            f"checking that {n:,} words overlap in ≤ {max_overlap} positions would compare {n * (n - 1) // 2:,} "
            f"pairs or sort more than {MAX_SUBWORD_KEYS:,} sub-word keys; at most {MAX_GRAM_CHECK_WORDS:,} "
            f"words are compared pair by pair"
        )
    else:
        bad_pair = _gram_pairs(code, (lambda g: g != max_overlap) if exact_overlap else (lambda g: g > max_overlap))
    if bad_pair is not None:
        raise AssertionError(f"pairwise overlaps violate the cap {max_overlap} (words {bad_pair[0]} and {bad_pair[1]})")


def min_distance(
    code, weight: int, max_keys: int | None = None, sample: int | None = None
) -> tuple[int, bool, tuple[int, int] | None]:
    """``(d, exact, pair)``: the minimum Hamming distance of a weight-w code of ``n ≥ 2`` distinct
    words (m ≤ 64; ``uint8 [n, m]`` rows or a :class:`~.packed.PackedCode`) when ``exact`` (``pair`` two rows at that distance), else a proven lower
    bound ``d`` on it.

    An upper bound and a pair come from the Gram matrix of the first ``sample`` words (at least
    two; exact on its own when ``n ≤ sample``); lower bounds from :func:`shared_subword` with
    ``removed = 0, 1, 2, …``: no shared ``(w − r)``-subset means every distance is ``> 2r``
    (distances of a constant-weight code are even), a shared one is a pair at distance ``≤ 2r``,
    which with the bound before it is exactly ``2r``.  The search stops once the bounds meet,
    or with the lower bound when the next test would sort more than ``max_keys`` keys
    (default :data:`~kernelgap.limits.MAX_SUBWORD_KEYS`; ``sample`` defaults to :data:`GRAM_WORDS`).
    """
    max_keys = MAX_SUBWORD_KEYS if max_keys is None else max_keys
    sample = GRAM_WORDS if sample is None else sample
    packed = as_packed(code)
    n = len(packed)
    if n < 2:
        raise ValueError("a minimum distance needs two words")
    head = packed.rows(slice(0, max(2, min(n, sample)))).astype(np.float64)
    gram = head @ head.T
    np.fill_diagonal(gram, -1)
    i, j = np.unravel_index(np.argmax(gram), gram.shape)
    upper, pair = 2 * (weight - int(gram[i, j])), (int(min(i, j)), int(max(i, j)))
    if n <= sample:
        return upper, True, pair
    lower = 0  # proven: every distance is ≥ lower
    for removed in range(weight + 1):
        if lower >= upper:
            return upper, True, pair
        if subword_key_count(n, weight, removed) > max_keys:
            return lower, False, None
        found = shared_subword(packed, weight, removed)
        if found is not None:  # a pair at distance ≤ 2·removed, and every distance is ≥ 2·removed
            return 2 * removed, True, found
        lower = 2 * removed + 2
    return upper, True, pair


def _check_cw_params(m: int, weight: int, max_overlap: int, count: int) -> None:
    if not 0 < weight <= m:
        raise FamilyError(f"weight must lie in 1..m = {m}, got {weight}")
    if not 0 <= max_overlap < weight:
        raise FamilyError(f"max_overlap must lie in 0..weight−1 = {weight - 1}, got {max_overlap}")
    if count < 1:
        raise FamilyError(f"a code needs at least one word, asked for {count}")


#: Most factors of the Johnson bound a family's check multiplies out (one per unit of the
#: overlap cap, each a big-integer step): checks stay instant; a larger cap leaves the
#: bound to the search, which computes it in full before drawing.
JOHNSON_STEPS = 100_000


def johnson_bound(m: int, weight: int, max_overlap: int, stop_above: int | None = None) -> int:
    """The Johnson bound on a constant-weight code of length ``m``, weight ``w`` and pairwise
    overlaps ≤ ``λ`` (minimum distance ``2δ``, ``δ = w − λ``)::

        A(m, w, λ) ≤ ⌊m/w ⌊(m−1)/(w−1) ⌊ … ⌊(m−λ)/(w−λ)⌋ … ⌋⌋⌋

    from ``A(m, 2δ, w) ≤ ⌊m/w · A(m−1, 2δ, w−1)⌋`` (count the pairs (word, position in its
    support)) down to ``A(m−λ, 2δ, δ) = ⌊(m−λ)/δ⌋`` (disjoint supports).  Every factor is
    ≥ 1, so the nested value only grows outwards: with ``stop_above`` the first partial
    value above it is returned (the bound exceeds it too) instead of finishing the product.
    """
    delta = weight - max_overlap
    value = (m - max_overlap) // delta
    for i in range(max_overlap - 1, -1, -1):
        if stop_above is not None and value > stop_above:
            break
        value = (m - i) * value // (weight - i)
    return value


def check_code_exists(m: int, weight: int, max_overlap: int, count: int) -> None:
    """A family's check that a constant-weight code of ``count`` words can exist: the
    parameters are consistent and ``count`` is at most the Johnson bound, multiplied out
    only for caps up to :data:`JOHNSON_STEPS` (beyond, the search computes it in full)."""
    _check_cw_params(m, weight, max_overlap, count)
    bound = johnson_bound(m, weight, max_overlap, stop_above=count) if max_overlap <= JOHNSON_STEPS else count
    if count > bound:
        raise FamilyError(
            f"no constant-weight code of length m={m}, weight {weight} and overlaps ≤ {max_overlap} "
            f"has {count:,} words: the Johnson bound allows at most {bound:,}"
        )


def random_code_bytes(m: int, count: int, batch: int = 256) -> int:
    """Memory of :func:`random_constant_weight`: the kept words (float32), one batch of draws
    (uniforms, their argsort, the words) and its overlaps with the kept words, then the
    check of the code, counted as a whole float64 Gram matrix with a mask and a copy (``18·n²``:
    more than the chunked check of :func:`check_constant_weight` takes)."""
    m, count = max(m, 0), max(count, 0)
    return 12 * count * m + batch * (24 * m + 4 * count + 4 * batch) + 18 * count * count


def greedy_constant_weight(m: int, weight: int, max_overlap: int, count: int) -> np.ndarray:
    """The lexicographic greedy code: scan weight-``w`` words in order, keep a word
    whose overlap with every kept word is ≤ ``max_overlap``; stop at ``count``."""
    _check_cw_params(m, weight, max_overlap, count)
    bound = johnson_bound(m, weight, max_overlap, stop_above=count)
    if count > bound:
        raise FamilyError(
            f"greedy code (m={m}, w={weight}, overlap ≤ {max_overlap}) cannot have {count} "
            f"words: such a code has only {bound} at most (Johnson bound)"
        )
    # C(m, w) takes seconds past m ≈ 10^5; beyond m = 4096 no scan gets near its end anyway
    total = comb(m, weight) if m <= 4096 else None
    kept = np.zeros((count, m), dtype=np.int64)
    n = 0
    for scanned, support in enumerate(combinations(range(m), weight)):
        if total is not None and n + (total - scanned) < count:  # the words left cannot reach count
            break
        word = np.zeros(m, dtype=np.int64)
        word[list(support)] = 1
        if n == 0 or (kept[:n] @ word).max() <= max_overlap:
            kept[n] = word
            n += 1
            if n == count:
                break
    if n < count:
        raise FamilyError(f"greedy code (m={m}, w={weight}, overlap ≤ {max_overlap}) has only {n} words")
    code = kept.astype(np.uint8)
    check_constant_weight(code, weight, max_overlap)
    return code


def random_constant_weight(
    m: int,
    weight: int,
    max_overlap: int,
    count: int,
    seed: int = 0,
    max_tries: int = 200_000,
    require_count: bool = True,
) -> np.ndarray:
    """A seeded random code: draw weight-``w`` words, keep those whose overlap with every kept
    word is ≤ ``max_overlap``, until ``count`` words; after ``max_tries`` draws give up (an
    error, or the words found if not ``require_count``).  A batch of 256 draws is checked
    against the kept words by one matrix product, then in order against its own earlier
    words: exactly the words the one-by-one scan keeps."""
    _check_cw_params(m, weight, max_overlap, count)
    bound = johnson_bound(m, weight, max_overlap, stop_above=count)
    what = f"random code (m={m}, w={weight}, overlap ≤ {max_overlap}, seed={seed})"
    if require_count and count > bound:
        raise FamilyError(
            f"{what} found only 0 of {count} words: no such code has more than {bound} "
            f"(Johnson bound), so none was drawn"
        )
    rng = np.random.default_rng(seed)
    target, batch = min(count, bound), 256
    total = -(-max_tries // batch) * batch
    dtype = np.float32 if m < 1 << 24 else np.float64  # overlaps ≤ m are exact sums
    kept = np.zeros((target, m), dtype=dtype)
    n = drawn = 0
    while drawn < total and n < target:
        if require_count and n + (total - drawn) < count:
            break
        draws = np.argsort(rng.random((batch, m)), axis=1)[:, :weight]
        words = np.zeros((batch, m), dtype=dtype)
        np.put_along_axis(words, draws, 1, axis=1)
        drawn += batch
        if n:
            words = words[(words @ kept[:n].T).max(axis=1) <= max_overlap]
        gram = words @ words.T
        chosen: list[int] = []
        for i in range(len(words)):
            if not chosen or gram[i, chosen].max() <= max_overlap:
                chosen.append(i)
                if n + len(chosen) == target:
                    break
        kept[n : n + len(chosen)] = words[chosen]
        n += len(chosen)
    if n == count or not require_count:
        code = kept[:n].astype(np.uint8)
        check_constant_weight(code, weight, max_overlap)
        return code
    left = "" if drawn >= total else f" (the {total - drawn:,} draws left cannot add {count - n:,} words)"
    raise FamilyError(f"{what} found only {n} of {count} words in {drawn:,} draws{left}")


#: Constant-weight code constructions by name (the ``cw`` family's ``method``):
#: ``(m, weight, max_overlap, count, seed) -> code``.
CW_METHODS = {
    "greedy": lambda m, w, cap, count, seed: greedy_constant_weight(m, w, cap, count),
    "random": random_constant_weight,
}
