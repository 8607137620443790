"""After the context sweep: the layer family's certified rank against N and against m, at
δ = 1/2 (Graham–Sloane classes) and at a tolerance below 1/2 (the whole middle layer), and
the certificate of each trained family (``curves.json``; docs/experiments.md, "The wall in
context length")."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

from ...args import parse_range
from ...errors import ConfigError, FamilyError, KernelgapError
from ...rationals import parse_delta
from ...theory.layer_curve import LAYER_BUDGET_S, LAYER_DELTA, LayerCertificates, growth_rate, length_curve, wall_curve
from ..steps import trained_families


def _curve_specs(spec, key: str = "curves") -> list[tuple[int, str]]:
    """``[context].curves`` of profile.toml: a list of ``{m = 12, length = "3..15"}``."""
    if not isinstance(spec, list) or not all(
        isinstance(c, dict) and set(c) == {"m", "length"} and isinstance(c["m"], int) and isinstance(c["length"], str)
        for c in spec
    ):
        raise ConfigError(f'[context] {key} must be a list of {{m = 12, length = "3..15"}} tables, got {spec!r}')
    return [(c["m"], c["length"]) for c in spec]


def _plans(spec: dict) -> list[tuple[Fraction, list[tuple[int, list[int]]], list[int]]]:
    """Per tolerance, its N-curves and its m: δ = 1/2 from ``curves`` and ``m``, and, where
    ``whole_layer_delta`` is set, that δ (below 1/2) from ``whole_layer_curves`` and
    ``whole_layer_m``."""
    plans = [(LAYER_DELTA, "curves", "m")]
    if spec.get("whole_layer_delta") is not None:
        try:
            delta = parse_delta(str(spec["whole_layer_delta"]))
        except KernelgapError as exc:
            raise ConfigError(f"[context] whole_layer_delta: {exc}") from None
        if delta >= LAYER_DELTA:
            raise ConfigError(f"[context] whole_layer_delta must lie below 1/2, got {delta}")
        plans.append((delta, "whole_layer_curves", "whole_layer_m"))
    return [
        (
            delta,
            [(m, parse_range(n, "--length", "N", least=3)) for m, n in _curve_specs(spec.get(curves, []), curves)],
            parse_range(spec[ms], "--m", "m", least=2) if spec.get(ms) else [],
        )
        for delta, curves, ms in plans
    ]


def curves(profile, out: Path, sweep_options: dict) -> dict:
    """At each tolerance: the certified rank against N at each configured m (with N* − 1 and
    N* added), the smallest N certifying the whole code per m, and the seconds it took; and
    the trained families' certificates.  An m whose family is refused (memory, scan limits)
    is listed in ``skipped`` with why."""
    start = time.perf_counter()
    at = LayerCertificates()
    skipped, length_curves, wall, seconds = [], [], [], {}
    plans = _plans(profile.settings["context"])
    for delta, specs, ms in plans:
        began = time.perf_counter()
        for m, lengths in specs:
            try:
                length_curves += length_curve([m], lengths, wall=True, certificates=at, deltas=[delta])["curves"]
            except FamilyError as exc:
                skipped.append({"m": m, "delta": str(delta), "curve": "length", "why": str(exc)})
        for m in ms:
            try:
                wall += wall_curve([m], certificates=at, deltas=[delta])["points"]
            except FamilyError as exc:
                skipped.append({"m": m, "delta": str(delta), "curve": "m", "why": str(exc)})
        seconds[str(delta)] = round(time.perf_counter() - began, 2)
    deltas = [str(delta) for delta, _, _ in plans]
    return {
        "deltas": deltas,
        "length_curves": length_curves,
        "wall": wall,
        "growth": {d: growth_rate([p for p in wall if p["delta"] == d]) for d in deltas},
        "skipped": skipped,
        "trained_families": trained_families(profile, "context", LAYER_DELTA, LAYER_BUDGET_S),
        "seconds_by_delta": seconds,
        "seconds": round(time.perf_counter() - start, 2),
    }
