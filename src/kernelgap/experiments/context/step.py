"""After the context sweep: the layer family's certified rank against N and against m, and
the certificate of each trained family (``curves.json``; docs/experiments.md, "The wall in
context length")."""

from __future__ import annotations

import time
from pathlib import Path

from ...args import parse_range
from ...errors import ConfigError, FamilyError
from ...theory.layer_curve import LAYER_BUDGET_S, LAYER_DELTA, LayerCertificates, length_curve, wall_curve
from ...theory.series import growth_rate
from ..steps import trained_families


def _curve_specs(spec) -> list[tuple[int, str]]:
    """``[context].curves`` of profile.toml: a list of ``{m = 12, length = "3..15"}``."""
    if not isinstance(spec, list) or not all(
        isinstance(c, dict) and set(c) == {"m", "length"} and isinstance(c["m"], int) and isinstance(c["length"], str)
        for c in spec
    ):
        raise ConfigError(f'[context] curves must be a list of {{m = 12, length = "3..15"}} tables, got {spec!r}')
    return [(c["m"], c["length"]) for c in spec]


def curves(profile, out: Path, sweep_options: dict) -> dict:
    """The certified rank against N at each configured m (with N* − 1 and N* added), the
    smallest N certifying the whole code per m, and the trained families' certificates.  An
    m whose family is refused (memory, scan limits) is listed in ``skipped`` with why."""
    start = time.perf_counter()
    spec = profile.settings["context"]
    specs = [(m, parse_range(lengths, "--length", "N", least=3)) for m, lengths in _curve_specs(spec["curves"])]
    ms = parse_range(spec["m"], "--m", "m", least=2)
    at = LayerCertificates()
    skipped, length_curves, wall = [], [], []
    for m, lengths in specs:
        try:
            length_curves += length_curve([m], lengths, wall=True, certificates=at)["curves"]
        except FamilyError as exc:
            skipped.append({"m": m, "curve": "length", "why": str(exc)})
    for m in ms:
        try:
            wall += wall_curve([m], certificates=at)["points"]
        except FamilyError as exc:
            skipped.append({"m": m, "curve": "m", "why": str(exc)})
    return {
        "delta": str(LAYER_DELTA),
        "length_curves": length_curves,
        "wall": wall,
        "growth": growth_rate(wall),
        "skipped": skipped,
        "trained_families": trained_families(profile, "context", LAYER_DELTA, LAYER_BUDGET_S),
        "seconds": round(time.perf_counter() - start, 2),
    }
