"""The probe's suites: which families, ranks, seeds and schedule each profile trains.

A suite trains the probed module and, beside it, the built-in ``elu1`` map
(plain linear attention, the baseline) at the same ranks and seeds.  Its
family is read either first-query (the query at position 1) or, for a causal
module, final-query (the query at position 3, which sees every token).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..training import FALLBACK_LR
from .verdicts import RECIPE_KEYS

#: Map of the built-in baseline the probed module is shown beside.
BASELINE = "elu1"


@dataclass
class Suite:
    """One family (and a disjoint test family for OOD) with ranks, seeds and a schedule."""

    name: str  # folder-safe label
    family: str
    params: dict
    ranks: list[int]
    seeds: list[int]
    train: dict = field(default_factory=dict)  # TrainConfig fields
    test_params: dict | None = None  # the test family: the training family with these changed

    @property
    def ood(self) -> bool:
        return self.test_params is not None


def _witness(ranks, seeds) -> Suite:
    train = {"lr": FALLBACK_LR, "mse_steps": 1000, "max_steps": 2000, "stop_below": 0.25}
    return Suite("witness", "witness", {}, ranks, seeds, train)


def _ood(n, ranks, seeds) -> Suite:
    params = {"n": n, "queries_per_class": 8, "split": "train"}
    train = {"lr": FALLBACK_LR, "mse_steps": 700, "max_steps": 1400, "stop_below": 0.0}
    return Suite(f"ood-n{n}", "ood", params, ranks, seeds, train, test_params={"split": "test"})


@dataclass(frozen=True)
class Recipe:
    """Another schedule for a run that did not fit: the suite's learning rate and its steps
    (both phases) scaled."""

    name: str  # folder-safe label
    lr_scale: float = 1.0
    steps_scale: int = 1

    def train(self, train: dict) -> dict:
        out = dict(train)
        for key in RECIPE_KEYS:  # lr, mse_steps, max_steps
            out[key] = train[key] * (self.lr_scale if key == "lr" else self.steps_scale)
        return out

    def describe(self) -> str:
        """``lr ÷ 3``, ``lr × 3``, ``3× steps``, or both: ``lr ÷ 3 over 2× steps``."""
        lr = f"lr ÷ {1 / self.lr_scale:g}" if self.lr_scale < 1 else f"lr × {self.lr_scale:g}"
        lr = lr if self.lr_scale != 1 else ""
        steps = f"{self.steps_scale}× steps" if self.steps_scale != 1 else ""
        return " over ".join(p for p in (lr, steps) if p) or "the suite's schedule"


#: The recipe search (docs/experiments.md, "Probe"): before a rank is called "not fitted"
#: (or "collapsed") where the theorem does not forbid a fit, its first seed trains again
#: with each of these schedules (one sweep, a variant each): a larger learning rate, and a
#: smaller one over a schedule twice as long (a smaller step needs more of them): two more
#: runs, three runs' worth of steps, per rank.
RECIPES: tuple[Recipe, ...] = (
    Recipe("lr-triple", lr_scale=3.0),
    Recipe("lr-third-steps-double", lr_scale=1 / 3, steps_scale=2),
)

#: The suites per profile (``quick``: a few minutes for a small module on 2 cores).
PROFILES: dict[str, list[Suite]] = {
    "quick": [_witness([16, 32], [0]), _ood(4, [4, 8], [0])],
    "paper": [
        _witness([1, 2, 4, 8, 12, 16, 24, 32, 64, 128, 256], [0, 1, 2]),
        _ood(8, [2, 4, 8, 16, 32, 64, 128], [0, 1]),
    ],
}


def suites(
    profile: str,
    ranks: dict[str, list[int]] | list[int] | None = None,
    seeds: list[int] | None = None,
    steps: int | None = None,
    lr: float | None = None,
    reading: str = "first",
    rank_free: bool = False,
) -> list[Suite]:
    """The profile's suites with a probe's overrides, as its
    :class:`~kernelgap.probe.config.ProbeConfig` checked them: ``ranks`` for every suite, or
    per suite name as ``{"witness": [8, 16], …}`` (an empty list leaves that suite out, a
    suite not named keeps its ranks), ``seeds``, ``steps`` (a third MSE, the rest
    power-mean) and ``lr``.  A ``rank_free`` module (one that takes no rank) trains once per
    seed, at each suite's largest rank (the rank of the baseline beside it)."""
    out = []
    for suite in PROFILES[profile]:
        chosen = ranks.get(suite.name) if isinstance(ranks, dict) else ranks
        if isinstance(ranks, dict) and chosen == []:
            continue  # left out
        train = dict(suite.train)
        if steps is not None:
            train.update(mse_steps=steps // 3, max_steps=steps - steps // 3)
        if lr is not None:
            train["lr"] = lr
        params = {**suite.params, "reading": reading}
        chosen = list(chosen or suite.ranks)
        chosen = [max(chosen)] if rank_free else chosen
        out.append(replace(suite, params=params, ranks=chosen, seeds=list(seeds or suite.seeds), train=train))
    return out
