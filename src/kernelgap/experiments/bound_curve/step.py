"""The bound curve: the certified rank against m (``curve.json``) and, where the profile's
sweep trains on ladder families, each trained family's certificate."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from ...args import parse_range
from ...theory.bound_curve import bound_curve
from ...theory.radon import DEFAULT_BUDGET_S
from ..steps import trained_families


def curve(profile, out: Path, sweep_options: dict) -> dict:
    """The certified rank against m for the configured family series, and the certificates
    of the families the sweep trains (none without a sweep file)."""
    spec = profile.settings["bound_curve"]
    payload = bound_curve(spec["code"], parse_range(spec["m"], "--m", "m", least=2), queries=spec["queries"])
    if profile.sweep_file("bound_curve") is not None:
        payload["trained_families"] = trained_families(profile, "bound_curve", Fraction(1, 2), DEFAULT_BUDGET_S)
    return payload
