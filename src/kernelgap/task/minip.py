"""The Min-IP task and its metrics (docs/theory.md, "The task").

Tokens are binary vectors ``x ∈ {0,1}^m``; a sequence is ``X = (x_1..x_N)``.
The target at position ``i`` is ``t_i(X) = min_j <x_i, x_j>`` with ``j``
ranging over *all* positions, ``i`` included, so ``t_i ≤ |x_i|``.

Two readings: every position is a query (``query_position=None``), or only
one position is scored (the causal final query scores position ``N``).
A model is **exact** when its max absolute error over the scored positions is
``< 1/2``: rounding then recovers every target.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

#: A model is exact when its max error is below this: rounding recovers every target.
EXACT_THRESHOLD = 0.5


def targets(tokens):
    """``t_i = min_j <x_i, x_j>`` for tokens ``[..., N, m]`` (array or tensor) → ``[..., N]``."""
    gram = tokens @ tokens.swapaxes(-1, -2) if isinstance(tokens, np.ndarray) else tokens @ tokens.transpose(-1, -2)
    return gram.min(-1) if isinstance(gram, np.ndarray) else gram.min(dim=-1).values


def targets_from_index(gram, index):
    """Targets of sequences given as token ids ``index [S, N]`` into a Gram matrix.

    ``gram[a, b] = <token_a, token_b>``; returns ``[S, N]`` with
    ``t[s, i] = min_j gram[index[s, i], index[s, j]]``.
    """
    pair = gram[index[:, :, None], index[:, None, :]]
    return pair.min(-1) if isinstance(pair, np.ndarray) else pair.min(dim=-1).values


@dataclass(frozen=True)
class Metrics:
    """Errors over the scored positions of a set of sequences (docs/theory.md, "The task").

    ``exact`` is ``max_error < 1/2``; ``exact_seq_acc`` is the share of
    sequences whose every scored position rounds to its target.
    """

    max_error: float
    mean_abs_error: float
    exact_seq_acc: float
    exact: bool
    sequences: int

    def as_dict(self) -> dict:
        return asdict(self)


def abs_errors(predictions, target) -> np.ndarray:
    """``|prediction − target|`` in float64 on the host, NaN read as ``inf`` (arrays or tensors)."""
    err = np.abs(_host(predictions) - _host(target))
    return np.where(np.isnan(err), np.inf, err)


def _host(x) -> np.ndarray:
    """A float64 numpy array of an array or a (possibly device, possibly grad) tensor."""
    if hasattr(x, "detach"):
        x = x.detach().double().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def error_metrics(predictions, target) -> Metrics:
    """Metrics for predictions and targets of shape ``[S, P]`` (P scored positions)."""
    metrics = MetricsAccumulator()
    metrics.update(predictions, target)
    return metrics.result()


class MetricsAccumulator:
    """:func:`error_metrics` over chunks (exhaustive families)."""

    def __init__(self) -> None:
        self.max_error = 0.0
        self.abs_sum = 0.0
        self.count = 0
        self.exact_sequences = 0
        self.sequences = 0

    def update(self, predictions, target) -> None:
        err = abs_errors(predictions, target)
        if err.size == 0:
            return
        per_seq = err.max(axis=-1)
        self.max_error = max(self.max_error, float(per_seq.max()))
        self.abs_sum += float(err.sum())
        self.count += err.size
        self.exact_sequences += int((per_seq < EXACT_THRESHOLD).sum())
        self.sequences += int(err.shape[0])

    def result(self) -> Metrics:
        if self.sequences == 0:
            return Metrics(0.0, 0.0, 1.0, True, 0)
        return Metrics(
            max_error=self.max_error,
            mean_abs_error=self.abs_sum / self.count,
            exact_seq_acc=self.exact_sequences / self.sequences,
            exact=self.max_error < EXACT_THRESHOLD,
            sequences=self.sequences,
        )


def choice_gap_share(gram, index, positions: list[int], min_gap: int = 2) -> float:
    """Share of sequences whose answer needs a choice with gap ≥ ``min_gap``.

    At a scored position the overlaps ``s_j = <x_i, x_j>`` with the *other*
    positions are compared: the answer needs a sharp choice when the largest
    and smallest differ by at least ``min_gap`` (a model that averages fails).
    """
    if len(index) == 0:
        return 0.0
    needs = np.zeros(len(index), dtype=bool)
    n = index.shape[1]
    for i in positions:
        others = [j for j in range(n) if j != i]
        s = np.stack([gram[index[:, i], index[:, j]] for j in others], axis=1)
        needs |= (s.max(axis=1) - s.min(axis=1)) >= min_gap
    return float(needs.mean())
