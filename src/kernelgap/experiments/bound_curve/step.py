"""The bound curve (no sweep): the certified rank against m (``curve.json``)."""

from __future__ import annotations

from pathlib import Path

from ...theory.bound_curve import bound_curve, parse_m_range


def curve(profile, out: Path, sweep_options: dict) -> dict:
    """The certified rank against m for the configured family series."""
    spec = profile.settings["bound_curve"]
    return bound_curve(spec["code"], parse_m_range(spec["m"]), queries=spec["queries"])
