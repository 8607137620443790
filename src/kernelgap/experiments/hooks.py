"""After-sweep steps: what each experiment writes beside its runs (no training of its own,
except where a step says so).

Each step is registered under its experiment's name and called as
``step(profile, out, sweep_options)`` with ``out`` the experiment's results
folder and ``sweep_options`` the reproduction's executor settings.  A step
registered with ``writes`` returns its payload and is skipped once that file
exists, so a resumed reproduction never redoes it.  The report
(:mod:`kernelgap.report`) reads these files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ..io import atomic_write_json
from ..models.constructions import build_construction, one_hot_candidates
from ..models.verify import check_exhaustive
from ..sweeps.config import load_sweep
from ..sweeps.executors import available_cores
from ..task.minip import choice_gap_share, error_metrics
from ..theory.bound_curve import bound_curve, parse_m_range
from ..theory.certificate import certify

Step = Callable[[object, Path, dict], None]
HOOKS: dict[str, Step] = {}


def after_sweep(*experiments: str, writes: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``step`` as what follows the sweeps of these experiments.  With ``writes``
    the step returns a payload that is written to ``out/<writes>`` (JSON), and it is not
    called again once that file exists."""

    def deco(step: Callable) -> Callable:
        def once(profile, out: Path, sweep_options: dict) -> None:
            path = out / writes
            if not path.exists():
                atomic_write_json(path, step(profile, out, sweep_options))

        for name in experiments:
            HOOKS[name] = once if writes else step
        return step

    return deco


def _runs(profile, experiment: str):
    return load_sweep(profile.sweep_file(experiment)).runs()


def _distinct_families(runs):
    """``(run, family)`` for the first run of each distinct training family, built once."""
    seen = set()
    for run in runs:
        key = json.dumps({"name": run.family.name, "params": run.family.params}, sort_keys=True)
        if key not in seen:
            seen.add(key)
            yield run, run.family.build()


def constructed(family) -> dict:
    """The one-hot construction restricted to the family, checked on every sequence."""
    model = one_hot_candidates(family)
    qpos = family.query_position - 1
    with torch.no_grad():
        pred = model.predict(torch.from_numpy(family.tokens).double(), torch.from_numpy(family.index), [qpos])[0]
    met = error_metrics(pred, family.targets()[:, [qpos]])
    return {"rank": model.scorer.feature_map.features, "sequences": met.sequences,
            "max_error": met.max_error, "exact": met.exact}


@after_sweep("witness", writes="certificate.json")
def witness_certificate(profile, out: Path, sweep_options: dict) -> dict:
    """The witness family's certificate (exact rationals) and the one-hot construction at the
    certified rank, checked on every sequence (``certificate.json``)."""
    family = _runs(profile, "witness")[0].family.build()
    return {**certify(family).to_json(), "m": family.m, "sequences": len(family),
            "constructed": constructed(family)}


@after_sweep("series", writes="series.json")
def series_certificates(profile, out: Path, sweep_options: dict) -> list:
    """Per family of the series: both bounds and the one-hot construction (``series.json``)."""
    rows = []
    for run, family in _distinct_families(_runs(profile, "series")):
        cert = certify(family)
        rows.append({"family": family.name, "params": run.family.params, "n": len(family.matching),
                     "m": family.m, "sequences": len(family), "certified_rank": cert.certified_rank,
                     "radon_rank": cert.radon.rank, "trace_rank": cert.trace.rank,
                     "constructed": constructed(family)})
    return sorted(rows, key=lambda r: r["n"])


@after_sweep("ood", writes="sizes.json")
def ood_sizes(profile, out: Path, sweep_options: dict) -> dict:
    """Per problem size: m, sequence counts, share of test answers needing a gap-≥2 choice
    (``sizes.json``)."""
    sizes = {}
    for run, train in _distinct_families(r for r in _runs(profile, "ood") if r.test_family is not None):
        test = run.test_family.build()
        sizes[json.dumps(run.family.params, sort_keys=True)] = {"label": f"n={run.family.params.get('n')}, m={train.m}", "m": train.m,
                      "train_sequences": len(train), "test_sequences": len(test),
                      "test_gap_share": choice_gap_share(test.gram(), test.index, test.scored_positions)}
    return sizes


@after_sweep("length", writes="constructed.json")
def length_construction(profile, out: Path, sweep_options: dict) -> list:
    """The rank-1 construction checked on every sequence of length 1, 2, 3 (``constructed.json``)."""
    m = profile.settings["length"]["m"]
    rows = []
    for n in (1, 2, 3):
        res = check_exhaustive(build_construction("rank1", m, n), m, n, torch.device("cpu"))
        rows.append({"N": n, "rank": 1, "m": m, "sequences": res["sequences"],
                     "max_error": res["max_error"], "exact": res["exact"]})
    return rows


@after_sweep("signed", "heads", "zoo", writes="certificates.json")
def family_certificates(profile, out: Path, sweep_options: dict) -> dict:
    """The certified rank of every distinct training family of the sweep (``certificates.json``)."""
    certs = {}
    for run, family in _distinct_families(_runs(profile, out.name)):
        key = json.dumps({"name": run.family.name, "params": run.family.params}, sort_keys=True)
        certs[key] = {"family": run.family.name, "params": run.family.params, "m": family.m,
                      "sequences": len(family),
                      "certified_rank": certify(family).certified_rank if family.matching else None}
    return certs


@after_sweep("precision", writes="quantized.json")
def precision_sketches(profile, out: Path, sweep_options: dict) -> dict:
    """Retrain the sweep's models and score them through b-bit sketches (``quantized.json``)."""
    from .precision import quantized_runs, read_records

    cfg = profile.settings["precision"]
    runs = _runs(profile, "precision")
    return quantized_runs(runs, [int(b) for b in cfg["bits"]], list(cfg["quantizers"]), read_records(out),
                          workers=_local_width(sweep_options, len(runs)))


@after_sweep("probe")
def probe_modules(profile, out: Path, sweep_options: dict) -> None:
    """Probe every configured module into ``out/<name>/`` beside the ``elu1`` baseline
    (``out/baseline/``, shared between equal suites); a module whose library is not
    installed leaves ``skipped.json``.  On the local pool the probes run side by side, one
    worker each (a probe's runs are one stack each, so one probe alone keeps one core busy);
    a run two probes share is trained by whichever claims it first."""
    entries = list(profile.probes)
    width = _local_width(sweep_options, len(entries))
    options = {**sweep_options, "workers": 1} if width > 1 else sweep_options
    with ThreadPoolExecutor(max_workers=width) as pool:
        for done in [pool.submit(_probe_one, entry, out, options) for entry in entries]:
            done.result()


def _local_width(sweep_options: dict, tasks: int) -> int:
    """How many of ``tasks`` a step runs side by side: one per worker of the local pool
    (a cluster's executor trains the sweeps; a step's own work stays in this process)."""
    if sweep_options.get("executor", "local") != "local":
        return 1
    return max(1, min(tasks, sweep_options.get("workers") or available_cores()))


def _probe_one(entry: dict, out: Path, sweep_options: dict) -> None:
    from ..models.external import ModuleImportError
    from ..probe import run_probe

    folder = out / entry["name"]
    try:
        run_probe(entry["target"], entry["kwargs"], folder, entry["profile"], entry["ranks"] or None,
                  entry["seeds"] or None, entry["steps"], entry["lr"], interface=entry["interface"],
                  args=entry["args"], output=entry["output"],
                  baseline=out / "baseline", **sweep_options)
    except ModuleImportError as exc:
        need = entry["requires"] or "its library"
        atomic_write_json(folder / "skipped.json", {
            "name": entry["name"], "target": entry["target"],
            "why": f"{need} is not installed (pip install 'kernelgap[zoo]'): {exc}"})


@after_sweep("bound_curve", writes="curve.json")
def ladder_curve(profile, out: Path, sweep_options: dict) -> dict:
    """The certified rank against m for the configured family series (``curve.json``)."""
    spec = profile.settings["bound_curve"]
    return bound_curve(spec["code"], parse_m_range(spec["m"]), queries=spec["queries"])
