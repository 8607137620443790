"""``kernelgap reproduce``: run the paper's experiments and write the report (issue #5).

A profile is a folder ``configs/<profile>/`` holding ``reproduce.toml`` (which
experiments, the bound-curve range) and one sweep TOML per experiment.  Each
experiment runs through the resumable sweep runner into ``OUT/<experiment>/``;
the untrained numbers (certificate, construction checks, OOD family facts,
bound curve) are written beside the runs; then ``summary.json`` and
``report.html`` are assembled from those files alone (``kernelgap report``
rebuilds them without training).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import __version__
from .errors import ConfigError, KernelgapError
from .io import atomic_write_json, read_json
from .models.constructions import build_construction, one_hot_candidates
from .models.verify import check_exhaustive
from .beyond.extras import BEYOND_EXTRAS
from .report.html import write_report
from .report.summary import build_summary
from .sweeps.config import load_sweep
from .sweeps.runner import run_sweep
from .task.minip import choice_gap_share, error_metrics
from .theory.bound_curve import bound_curve, parse_m_range
from .theory.certificate import certify

CONFIG_ROOT = Path(__file__).resolve().parents[2] / "configs"


@dataclass
class Profile:
    """``configs/<name>/reproduce.toml``: the experiments of one profile."""

    name: str
    folder: Path
    experiments: list[str]
    bound_curve: dict = field(default_factory=dict)
    length_m: int = 4


def load_profile(name: str, config_root: Path | None = None) -> Profile:
    folder = (config_root or CONFIG_ROOT) / name
    path = folder / "reproduce.toml"
    if not path.is_file():
        known = sorted(p.parent.name for p in (config_root or CONFIG_ROOT).glob("*/reproduce.toml"))
        raise ConfigError(f"unknown profile {name!r}; choose from {', '.join(known) or '(none found)'}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    unknown = set(data) - {"experiments", "bound_curve", "length_m"}
    if unknown:
        raise ConfigError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    experiments = data.get("experiments", [])
    if not experiments or not all(isinstance(e, str) for e in experiments):
        raise ConfigError(f"{path}: 'experiments' must be a non-empty list of names")
    for exp in experiments:
        if not (folder / f"{exp}.toml").is_file():
            raise ConfigError(f"{path}: experiment {exp!r} has no {exp}.toml beside it")
    return Profile(name, folder, experiments, data.get("bound_curve", {}), data.get("length_m", 4))


# -- what is written beside the runs (no training) ---------------------------------------

def witness_extras(profile: Profile, out: Path) -> None:
    """The witness family's certificate (exact rationals) and the one-hot construction at the
    certified rank, checked on every sequence."""
    path = out / "certificate.json"
    if path.exists():
        return
    run = load_sweep(profile.folder / "witness.toml").runs()[0]
    family = run.family.build()
    model = one_hot_candidates(family)
    qpos = family.query_position - 1
    with torch.no_grad():
        pred = model.predict(torch.from_numpy(family.tokens).double(), torch.from_numpy(family.index), [qpos])[0]
    met = error_metrics(pred, family.targets()[:, [qpos]])
    constructed = {"rank": model.scorer.feature_map.features, "sequences": met.sequences,
                   "max_error": met.max_error, "exact": met.exact}
    atomic_write_json(path, {**certify(family).to_json(), "m": family.m, "sequences": len(family),
                             "constructed": constructed})


def ood_extras(profile: Profile, out: Path) -> None:
    """Per problem size: m, sequence counts, share of test answers needing a gap-≥2 choice."""
    path = out / "sizes.json"
    if path.exists():
        return
    sizes = {}
    for run in load_sweep(profile.folder / "ood.toml").runs():
        key = json.dumps(run.family.params, sort_keys=True)
        if key in sizes or run.test_family is None:
            continue
        train, test = run.family.build(), run.test_family.build()
        sizes[key] = {"label": f"n={run.family.params.get('n')}, m={train.m}", "m": train.m,
                      "train_sequences": len(train), "test_sequences": len(test),
                      "test_gap_share": choice_gap_share(test.gram(), test.index, test.scored_positions)}
    atomic_write_json(path, sizes)


def length_extras(profile: Profile, out: Path) -> None:
    """Rank-1 construction checked on every sequence of length 1, 2, 3."""
    path = out / "constructed.json"
    if path.exists():
        return
    m = profile.length_m
    rows = []
    for n in (1, 2, 3):
        res = check_exhaustive(build_construction("rank1", m, n), m, n, torch.device("cpu"))
        rows.append({"N": n, "rank": 1, "m": m, "sequences": res["sequences"],
                     "max_error": res["max_error"], "exact": res["exact"]})
    atomic_write_json(path, rows)


EXTRAS: dict[str, Callable[[Profile, Path], None]] = {
    "witness": witness_extras, "ood": ood_extras, "length": length_extras,
}
EXTRAS.update(BEYOND_EXTRAS)  # issue #6: signed, heads, zoo, precision, probe


def curve_extras(profile: Profile, out: Path) -> None:
    spec = profile.bound_curve
    if not spec or (out / "curve.json").exists():
        return
    payload = bound_curve(spec.get("code", "ladder"), parse_m_range(spec.get("m", "32..96..16")),
                          queries=spec.get("queries"))
    atomic_write_json(out / "curve.json", payload)


# -- the pipeline ---------------------------------------------------------------------------

def claim_output(out: Path, profile: str) -> None:
    """Create or reuse ``out``; refuse a folder that holds something else."""
    if out.exists() and not out.is_dir():
        raise KernelgapError(f"--out {out} exists and is not a folder")
    meta_path = out / "reproduce.json"
    if out.is_dir() and any(out.iterdir()):
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError):
            raise KernelgapError(f"--out {out} is not empty and is not a kernelgap reproduction folder") from None
        if meta.get("profile") != profile:
            raise KernelgapError(f"--out {out} holds the {meta.get('profile')!r} profile, not {profile!r}")
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(meta_path, {"profile": profile, "version": __version__,
                                      "commands": [command_line()], "started": time.time()})
    except OSError as exc:
        raise KernelgapError(f"cannot write to --out {out}: {exc.strerror}") from None


def command_line() -> str:
    return "kernelgap " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "kernelgap reproduce"


def reproduce(profile: str = "quick", out: str | Path | None = None, executor: str = "local",
              workers: int | None = None, address: str | None = None,
              config_root: Path | None = None, log=print) -> Path:
    """Run every experiment of a profile (resumable), then write summary and report."""
    prof = load_profile(profile, config_root)
    out = Path(out or f"results/reproduce-{profile}")
    claim_output(out, profile)
    start = time.perf_counter()
    for exp in prof.experiments:
        log(f"[{exp}] sweep {prof.folder / (exp + '.toml')} → {out / exp}")
        res = run_sweep(prof.folder / f"{exp}.toml", out / exp, executor=executor,
                        workers=workers, address=address)
        log(f"[{exp}] {res.total} runs: {res.done_before} reused, {res.ran} trained "
            f"({res.wall_time_s:.0f} s)")
        if exp in EXTRAS:
            EXTRAS[exp](prof, out / exp)
    curve_extras(prof, out / "bound_curve")
    return write_summary_and_report(out, profile, wall_time_s=time.perf_counter() - start, log=log)


def write_summary_and_report(out: Path, profile: str | None = None, wall_time_s: float | None = None,
                             log=print) -> Path:
    """``summary.json`` and ``report.html`` from the result files in ``out``.

    Without ``wall_time_s`` (``kernelgap report``) the wall time the last
    reproduction recorded is kept.
    """
    summary = build_summary(out, profile)
    if wall_time_s is None:
        wall_time_s = (read_json(out / "summary.json") or {}).get("wall_time_s")
    if wall_time_s is not None:
        summary["wall_time_s"] = round(wall_time_s, 1)
    atomic_write_json(out / "summary.json", summary)
    report = write_report(summary, out)
    log(f"summary: {out / 'summary.json'}\nreport:  {report}")
    return report
