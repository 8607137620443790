"""The run rows several sections of ``summary.json`` share (:class:`RunRow`, …), and trained
families beside their certificates: the runs on each family an experiment
trains, and the sandwich of its minimal rank (:func:`~kernelgap.report.criteria.sandwich`).
A run counts as an exact model only when it was scored on every sequence of its family."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ..validation import JsonInt, JsonNumber, Section, json_at_least
from .criteria import exact, first_rank, grouped, sandwich
from .html import fmt, of, reached

#: A share: a number in [0, 1].
Share = Annotated[JsonNumber, Field(ge=0, le=1)]


class RunRow(Section):
    """One trained run as :func:`~kernelgap.report.criteria.run_row` reads its record: the
    test keys only where it was tested on a pool, the sign use only of a signed kernel."""

    id: str
    feature_map: str
    kind: Literal["kernel", "softmax", "module"]
    rank: json_at_least(1)
    heads: JsonInt | None
    features: JsonInt | None
    signed: bool
    seed: JsonInt
    status: Literal["ok", "diverged"]
    steps: JsonInt
    wall_time_s: JsonNumber
    family: str
    params: dict[str, Any]
    family_sha256: str | None
    max_error: JsonNumber | None
    exact_seq_acc: Share | None
    mean_abs_error: JsonNumber | None
    tries: json_at_least(1)
    distilled: bool
    pruned_from: JsonInt | None
    exact: bool
    test_max_error: JsonNumber | None = None
    test_exact_seq_acc: Share | None = None
    test_exact: bool | None = None
    guarded_share: Share | None = None
    min_abs_denominator: JsonNumber | None = None
    negative_denominator_share: Share | None = None
    negative_weight_share: Share | None = None


class SoftmaxRow(Section):
    """One trained softmax run: its seed, train max error and verdict."""

    seed: JsonInt
    max_error: JsonNumber | None
    exact: bool


class Transition(Section):
    """One map: the smallest features (or rank) at which most seeds pass, and the largest tried."""

    transition: JsonInt | None
    max_tried: JsonInt


class Growth(Section):
    """A least-squares fit of log2(rank) against m over ``points`` points:
    ``log2_per_m·m + intercept``."""

    log2_per_m: JsonNumber
    intercept: JsonNumber
    points: JsonInt


class TrainedRun(Section):
    """One run on a trained family: its verdict, and whether it was scored on the whole family."""

    feature_map: str
    rank: json_at_least(1)
    seed: JsonInt
    max_error: JsonNumber | None
    exact: bool
    tries: json_at_least(1) = 1  # the first try and its fresh starts (train.restarts)
    pruned_from: JsonInt | None = None  # the rank of the wider table it was cut from (train.prune_from)
    whole_family: bool


class TrainedRank(Section):
    """The runs at one rank: how many seeds, how many exact models, the best max error."""

    rank: JsonInt
    seeds: json_at_least(1)
    exact: json_at_least(0)
    best_max_error: JsonNumber | None


class ExactBelow(Section):
    """A run that is an exact model of its family below the family's certificate."""

    feature_map: str
    rank: JsonInt
    seed: JsonInt
    max_error: JsonNumber | None


class TrainedFamily(Section):
    """One trained family (as its step certified it, or as its runs name it: :func:`family_of_rows`),
    its runs by rank, and the sandwich of its minimal rank."""

    family: str
    kind: str | None = None  # (a family of older steps names no kind, no SHA-256: :func:`same_family`)
    params: dict[str, Any]
    sha256: str | None = None
    m: JsonInt | None = None
    length: JsonInt | None = None
    n: JsonInt | None = None
    sequences: JsonInt | None
    certified_rank: JsonInt | None
    method: str | None = None
    constructed_rank: JsonInt | None
    runs: list[TrainedRun]
    ranks: list[TrainedRank]
    exact_from: JsonInt | None
    exact_not_on_whole_family: json_at_least(0)
    exact_below_certificate: list[ExactBelow]
    certified: JsonInt | None
    constructed: JsonInt | None
    trained_any: JsonInt | None
    trained_most: JsonInt | None
    determined: bool


def family_of_rows(row: dict) -> dict:
    """A trained family known only from its runs (the step has not written its certificate)."""
    params, unknown = row["params"], ("n", "sequences", "certified_rank", "method", "constructed_rank")
    return {
        "family": row["family"],
        "kind": row["family"],
        "params": params,
        "sha256": row["family_sha256"],
        "m": params.get("m"),
        "length": params.get("length"),
        **dict.fromkeys(unknown),
    }


def same_family(row: dict, fam: dict) -> bool:
    """Whether a run trained on ``fam``: the same name, parameters and file content."""
    return (
        row["family"] == fam.get("kind", row["family"])  # (a series.json of older runs names no kind)
        and row["params"] == fam["params"]
        and row.get("family_sha256") == fam.get("sha256")
    )


def whole_family(train: dict, sequences) -> bool:
    """Whether a run was scored on every sequence of its family, not on guarded weights."""
    return sequences is not None and train.get("sequences") == sequences and not train.get("guarded", False)


def trained(fam: dict, rows: list[dict], train_of: dict[str, dict]) -> dict:
    """The runs on one trained family, and the sandwich of its minimal rank."""
    mine = [r for r in rows if same_family(r, fam)]
    runs = [
        TrainedRun(
            **{k: r[k] for k in ("feature_map", "rank", "seed", "max_error", "exact")},
            tries=r.get("tries", 1),
            pruned_from=r.get("pruned_from"),
            whole_family=whole_family(train_of.get(r["id"]) or {}, fam["sequences"]),
        ).dump()
        for r in sorted(mine, key=lambda r: (r["feature_map"], r["rank"], r["seed"]))
    ]
    models = [{**r, "exact": r["exact"] and r["whole_family"]} for r in runs]
    by_rank = grouped(models, lambda r: r["rank"])
    cert = fam["certified_rank"]
    return TrainedFamily(
        **fam,
        runs=runs,
        ranks=[
            TrainedRank(
                rank=rank,
                seeds=len(rs),
                exact=sum(r["exact"] for r in rs),
                best_max_error=min((r["max_error"] for r in rs if r["max_error"] is not None), default=None),
            )
            for rank, rs in sorted(by_rank.items())
        ],
        exact_from=first_rank(models, exact_model),  # most seeds
        exact_not_on_whole_family=sum(1 for r in runs if r["exact"] and not r["whole_family"]),
        exact_below_certificate=[
            {k: r[k] for k in ExactBelow.model_fields}
            for r in models
            if r["exact"] and cert is not None and r["rank"] < cert
        ],
        **sandwich(cert, fam["constructed_rank"], models),
    ).dump()


def exact_model(row: dict) -> bool:
    """A run that is an exact model of its whole family (``exact`` of :func:`trained`'s models)."""
    return exact(row) and row["exact"]


def trained_section(results, name: str, families: list[dict] | None) -> list[dict]:
    """:func:`trained` of each family ``name`` trains: its step's, or (``None``) the runs' own."""
    rows = results.rows(name)
    train_of = {rec["id"]: rec.get("train") or {} for rec in results.records(name)}
    if families is None:
        seen: dict[str, dict] = {}
        for r in rows:
            seen.setdefault(repr((r["family"], sorted(r["params"].items()), r["family_sha256"])), family_of_rows(r))
        families = list(seen.values())
    return [trained(f, rows, train_of) for f in families]


def minimal_rank(fam: dict) -> str:
    """The sandwich of :func:`~kernelgap.report.criteria.sandwich` as one verdict:
    ``= 16 (determined)`` or ``7 … 16 (open)`` (``?``: no upper bound yet)."""
    if fam["determined"]:
        return f"= {fam['certified']} (determined)"
    uppers = [u for u in (fam["constructed"], fam["trained_any"]) if u is not None]
    return f"{fmt(fam['certified'])} … {min(uppers) if uppers else '?'} (open)"


def trained_conclusions(t: dict, name: str) -> dict[str, str]:
    """The conclusions on one trained family (:func:`trained`), each named ``name: …``."""
    top = max((r["rank"] for r in t["runs"]), default=None)
    cert = t["certified_rank"]
    at = [r for r in t["ranks"] if cert is not None and r["rank"] == cert]
    return {
        f"{name}: certified rank": fmt(cert),
        f"{name}: constructed rank": fmt(t["constructed_rank"]),
        f"{name}: seeds exact at the certificate": of(at[0]["exact"], at[0]["seeds"]) if at else "not trained at it",
        f"{name}: exact from (some seed)": reached(t["trained_any"], top, "r = "),
        f"{name}: exact from (most seeds)": reached(t["trained_most"], top, "r = "),
        f"{name}: minimal rank": minimal_rank(t),
        f"{name}: runs exact below the certificate": str(len(t["exact_below_certificate"])),
        f"{name}: exact runs not scored on the whole family": str(t["exact_not_on_whole_family"]),
    }
