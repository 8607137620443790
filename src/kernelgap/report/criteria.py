"""Every threshold and criterion of the report, defined once, and the run rows it reads from
a reproduction folder's result files (:class:`Results`)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..io import digest_problem, read_json, read_run_records
from ..task.minip import EXACT_THRESHOLD
from .integrity import unsealed

#: A run "solves" an unseen test pool when this share of its test sequences is exact.
#: Test max error < 1/2 is the stricter reading; MLP readouts leave 0.3–0.9 on a few
#: unseen tokens, so exact-sequence accuracy is the usable OOD metric.
OOD_SOLVED_ACC = 0.95


def exact(row: dict) -> bool:
    return row["max_error"] is not None and row["max_error"] < EXACT_THRESHOLD


def solves_test_pool(row: dict) -> bool:
    return (row.get("test_exact_seq_acc") or 0.0) >= OOD_SOLVED_ACC


def test_exact(row: dict) -> bool:
    return row.get("test_max_error") is not None and row["test_max_error"] < EXACT_THRESHOLD


def majority(hits: int, seeds: int) -> bool:
    return hits * 2 > seeds


def every(hits: int, seeds: int) -> bool:
    return hits == seeds


def at_edge(hits: int, seeds: int) -> bool:
    """A verdict read by majority sits *at the edge* when its seeds disagree (or there is only
    one): another CPU's rounding of one seed can change it."""
    return seeds < 2 or 0 < hits < seeds


def edge(rows: list[dict], ok, what: str = "exact") -> str | None:
    """Why a verdict over ``rows`` (its seeds) is :func:`at_edge` (``2 of 3 seeds exact``),
    ``None`` where it is firm."""
    hits = sum(bool(ok(r)) for r in rows)
    return f"{hits} of {len(rows)} seeds {what}" if at_edge(hits, len(rows)) else None


def grouped(rows, key) -> dict:
    """``{key(row): [rows…]}``, the keys in the order they first appear."""
    out: dict = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def first_rank(rows: list[dict], ok, key: str = "rank", rule=majority) -> int | None:
    """Smallest ``key`` value (rank, features, …) at which ``rule(seeds satisfying ok, seeds)``."""
    by = grouped((r for r in rows if r.get(key) is not None), lambda r: r[key])
    return next((k for k in sorted(by) if rule(sum(bool(ok(r)) for r in by[k]), len(by[k]))), None)


def sandwich(
    certified: int | None,
    constructed: int | None,
    rows: list[dict],
    by: str = "feature_map",
    seeds: int | None = None,
) -> dict:
    """The minimal rank of a family pinned between a lower bound and upper bounds by example.

    ``certified`` is the certificate's rank (docs/theory.md, "The lower bound as a
    certificate") and ``constructed`` the smallest rank of an exact construction, ``None``
    where there is none.  ``rows`` are trained runs with ``rank``, ``seed`` and ``exact``,
    which must mean max error < 1/2 *on every sequence of the family*: only then is a run a
    proof by example that the minimal rank is at most its rank.  Runs are grouped by ``by``;
    a rank's seeds are ``seeds``, default the group's, so a seed missing at a rank counts
    as not exact there.

    - ``trained_any``: the smallest rank at which some run is exact;
    - ``trained_most``: the smallest rank at which, in some group, strictly more than half
      of the seeds are exact (:func:`majority`);
    - ``determined``: ``certified == min(constructed, trained_any)``: the minimal rank is
      known exactly (an upper bound below ``certified`` leaves it undetermined).
    """
    groups = grouped((r for r in rows if r.get("rank") is not None), lambda r: r.get(by))
    any_ranks, most_ranks = [], []
    for group in groups.values():
        hits: dict[int, set] = defaultdict(set)
        for r in group:
            if r.get("exact") is True:
                hits[r["rank"]].add(r["seed"])
        any_ranks += list(hits)
        total = len({r["seed"] for r in group}) if seeds is None else seeds
        most_ranks += [rank for rank, won in hits.items() if majority(len(won), total)]
    trained_any = min(any_ranks, default=None)
    uppers = [u for u in (constructed, trained_any) if u is not None]
    return {
        "certified": certified,
        "constructed": constructed,
        "trained_any": trained_any,
        "trained_most": min(most_ranks, default=None),
        "determined": certified is not None and bool(uppers) and certified == min(uppers),
    }


def run_row(rec: dict) -> dict:
    """One run record as a report row (every section reads runs through this)."""
    model = rec["config"]["model"]
    kind = model["kind"]
    fm = {"kernel": model["feature_map"], "softmax": "softmax"}.get(kind, "module")
    train = rec["train"]
    row = {
        "id": rec["id"],
        "feature_map": fm,
        "kind": kind,
        "rank": model["rank"],
        "heads": model["heads"],
        "features": rec.get("features", _features(model)),
        "signed": bool(rec.get("signed_kernel", "kernel" in train)),  # older records: sign use recorded
        "seed": rec["seed"],
        "status": rec["status"],
        "steps": rec["steps"],
        "wall_time_s": rec["wall_time_s"],
        "family": rec["config"]["family"]["name"],
        "params": rec["config"]["family"]["params"],
        "family_sha256": rec["config"]["family"].get("sha256"),  # a family file's content (None: registered)
        "max_error": train["max_error"],
        "exact_seq_acc": train["exact_seq_acc"],
        "mean_abs_error": train["mean_abs_error"],
        "tries": len(rec.get("restarts") or ()) or 1,  # the first try and its fresh starts (train.restarts)
        "distilled": bool(rec.get("distilled")),  # started from a trained table (train.distill)
        "pruned_from": (rec.get("pruned") or {}).get("from_rank"),  # cut from a wider table (train.prune_from)
    }
    row["exact"] = exact(row)
    if rec.get("test"):
        row.update(test_max_error=rec["test"]["max_error"], test_exact_seq_acc=rec["test"]["exact_seq_acc"])
        row["test_exact"] = test_exact(row)
    row.update(train.get("kernel") or {})  # sign use of a signed kernel
    return row


def _features(model: dict) -> int | None:
    """An older record's feature count: rank × heads (a module's heads: null or 1), None for softmax."""
    if model["kind"] == "softmax":
        return None
    return model["rank"] * (model.get("heads") or 1)


def family_size(row: dict) -> int:
    """The size ``n`` of a run's family (0 for a family without one)."""
    return int(row["params"].get("n") or 0)


def sorted_by(rows: list[dict], *keys: str) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def unique(rows: list[dict]) -> list[dict]:
    """Rows with distinct run ids (a run in two pooled sweeps counts once, as first listed)."""
    out: dict[str, dict] = {}
    for r in rows:
        out.setdefault(r["id"], r)
    return list(out.values())


#: Pools: the runs of every experiment that declares the pool, read together (each run
#: once), each keeping the rows that pass its rule.
POOLS = {
    "witness": lambda r: r["family"] == "witness" and r["kind"] == "kernel" and r["heads"] == 1,
    "ood": lambda r: r["kind"] == "kernel",
}


class Results:
    """A reproduction folder read through its registered experiments."""

    def __init__(self, root: str | Path, experiments):
        self.root = Path(root)
        self.experiments = list(experiments)
        self._rows: dict[str, list[dict]] = {}
        self._pooled: dict[str, list[dict]] = {}

    def folder(self, name: str) -> Path:
        return self.root / name

    def read(self, name: str, file: str):
        """The payload of a step file; ``None`` when it is missing, unreadable or altered."""
        data = read_json(self.folder(name) / file)
        return None if isinstance(data, dict) and digest_problem(data) else unsealed(data)

    def records(self, name: str) -> list[dict]:
        return read_run_records(self.folder(name))

    def rows(self, name: str) -> list[dict]:
        """The experiment's runs as report rows (:func:`run_row`)."""
        if name not in self._rows:
            self._rows[name] = [run_row(r) for r in self.records(name)]
        return self._rows[name]

    def pool(self, pool: str) -> list[str]:
        """The experiments whose runs join ``pool``, in registry order."""
        return [e.name for e in self.experiments if pool in e.pools]

    def pooled(self, pool: str) -> list[dict]:
        """Every run of the pool's experiments that passes its rule, each run once."""
        if pool not in self._pooled:
            keep = POOLS[pool]
            self._pooled[pool] = unique([r for name in self.pool(pool) for r in self.rows(name) if keep(r)])
        return self._pooled[pool]

    def witness_certified_rank(self) -> int | None:
        """The witness family's certified rank, from the first witness-pool experiment that has it."""
        for name in self.pool("witness"):
            cert = self.read(name, "certificate.json")
            if isinstance(cert, dict) and cert.get("certified_rank"):
                return cert["certified_rank"]
            certs = self.read(name, "certificates.json")
            for entry in certs.values() if isinstance(certs, dict) else ():
                if isinstance(entry, dict) and entry.get("family") == "witness" and entry.get("certified_rank"):
                    return entry["certified_rank"]
        return None
