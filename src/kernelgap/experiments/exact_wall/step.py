"""The exact wall's step (no sweep): :func:`kernelgap.theory.wall.wall` on the profile's m and
tolerances, written to ``wall.json`` (docs/theory.md, "The tropical wall")."""

from __future__ import annotations

from pathlib import Path

from ...theory.wall import wall
from .experiment import planned


def table(profile, out: Path, sweep_options: dict) -> dict:
    """Every entry of ``[exact_wall]``'s ``m × delta`` at its solver budget ``rlimit``."""
    ms, deltas, rlimit = planned(profile.settings["exact_wall"])
    return wall(ms, deltas, rlimit)
