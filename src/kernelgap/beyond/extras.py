"""Untrained numbers and post-training evaluations written beside the issue-#6 sweeps.

Each function takes ``(profile, out)`` like the entries of
``kernelgap.reproduce.EXTRAS`` (``profile.folder`` is ``configs/<profile>/``,
``out`` the experiment's results folder) and skips work whose file exists.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from ..io import atomic_write_json
from ..sweeps.config import load_sweep
from ..theory.certificate import certify
from .settings import load_settings


def _certificates(profile, out: Path, exp: str) -> None:
    """The certificate of every distinct training family of a sweep (``certificates.json``)."""
    path = out / "certificates.json"
    if path.exists():
        return
    certs = {}
    for run in load_sweep(profile.folder / f"{exp}.toml").runs():
        key = json.dumps({"name": run.family.name, "params": run.family.params}, sort_keys=True)
        if key in certs:
            continue
        family = run.family.build()
        cert = certify(family).to_json() if family.matching else {}
        certs[key] = {"family": run.family.name, "params": run.family.params, "m": family.m,
                      "sequences": len(family), "certified_rank": cert.get("certified_rank")}
    atomic_write_json(path, certs)


def precision_extras(profile, out: Path) -> None:
    """Retrain the ``precision`` sweep's models and score them through b-bit sketches."""
    from .precision import quantized_runs, read_records

    path = out / "quantized.json"
    if path.exists():
        return
    cfg = load_settings(profile.folder)["precision"]
    runs = load_sweep(profile.folder / "precision.toml").runs()
    payload = quantized_runs(runs, [int(b) for b in cfg["bits"]], list(cfg["quantizers"]),
                             read_records(out))
    atomic_write_json(path, payload)


def probe_extras(profile, out: Path) -> None:
    """Run the probe on the configured module (the shipped example) into ``out``."""
    from ..probe import run_probe
    from ..sweeps.executors import available_cores

    if (out / "probe.json").exists():
        return
    cfg = load_settings(profile.folder)["probe"]
    target = cfg["target"]
    module, sep, cls = target.rpartition(":")
    if module.endswith(".py") and not Path(module).is_absolute():
        # relative to the repository holding the profile, else to this source checkout
        roots = [Path(profile.folder).resolve().parents[1], Path(__file__).resolve().parents[3]]
        root = next((r for r in roots if (r / module).is_file()), roots[0])
        target = f"{root / module}{sep}{cls}"
    run_probe(target, kwargs=dict(cfg["kwargs"]), out=out, profile=cfg["profile"], workers=available_cores())


#: Each issue-#6 experiment's untrained numbers, written after its sweep.
BEYOND_EXTRAS = {
    **{exp: partial(_certificates, exp=exp) for exp in ("signed", "heads", "zoo")},
    "precision": precision_extras, "probe": probe_extras,
}
