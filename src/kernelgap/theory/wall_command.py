"""``kernelgap wall`` (docs/theory.md, "The tropical wall"): its flags, checked before any
solver or torch is imported, then :func:`kernelgap.theory.wall.wall`."""

from __future__ import annotations

import json

import typer

from ..args import parse_range
from ..limits import MAX_WALL_M, WALL_RLIMIT


def wall_cmd(
    m: str = typer.Option("2..5", "--m", help="m values: 2..5 or 2,3,4 (2 ≤ m ≤ 6)."),
    delta: str = typer.Option("2/5,1/2", "--delta", help="Tolerances δ: any δ < 1/2 gives one order; 1/2 two."),
    rlimit: int = typer.Option(WALL_RLIMIT, "--rlimit", help="Solver work budget per call (z3 rlimit units)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """The least rank of one nonnegative head on {0,1}^m at long context: a min-plus table found
    and scored, the rank below refuted by two solvers, beside the pair ceiling and 2^m."""
    from ..errors import KernelgapError
    from ..rationals import parse_delta

    ms = parse_range(m, "--m", "m", least=2)
    if ms[-1] > MAX_WALL_M:
        raise KernelgapError(f"--m: the wall is computed for m ≤ {MAX_WALL_M}, got {ms[-1]}")
    deltas = [parse_delta(d.strip()) for d in delta.split(",")]
    from .wall import wall

    payload = wall(ms, deltas, rlimit, None if as_json else typer.echo)
    typer.echo(json.dumps(payload, indent=2) if as_json else f"solver budget per call: rlimit {rlimit:,}")
