"""Refusals that once imported torch first (docs/formats.md: a refusal costs no torch import
where the check needs none): ``verify``'s m and lengths, ``reproduce``'s profile, ``probe``'s
flags (d-model, executor, workers, time limits, steps, learning rate, ranks, seeds), and the
bounds every number flag now has.  Each command line runs in a child forked from a driver that
never imported torch (tests/test_fast_refusal.py's driver), which reports its exit status, its
stderr and whether ``torch`` is in ``sys.modules`` afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_fast_refusal import not_refused_before_torch, run_driver

DECAYED = "kernelgap.probe.examples:DecayedLinearAttention"
HUGE = str(10**30)


def refused_lines(tmp: Path) -> list[list[str]]:
    (tmp / "length-m").mkdir()
    (tmp / "length-m" / "profile.toml").write_text('experiments = ["length"]\n[length]\nm = 100000\n')
    (tmp / "precision").mkdir()
    (tmp / "precision" / "profile.toml").write_text('experiments = ["precision"]\n')
    (tmp / "stop-inf.toml").write_text('name = "x"\n[family]\nname = "witness"\n[train]\nstop_below = inf\n')
    probe = ["probe", DECAYED, "--out", str(tmp / "p")]
    return [
        ["verify", "--m", "0"],
        ["verify", "--m", "100000"],
        ["verify", "--m", "12"],
        ["verify", "--m", "2", "--length", "100"],
        ["reproduce", "--profile", "nope"],
        ["reproduce", "--profile", str(tmp / "length-m")],
        ["reproduce", "--profile", str(tmp / "precision")],
        ["reproduce", "--workers", "0"],
        ["reproduce", "--workers", HUGE],
        [*probe, "--d-model", "0"],
        [*probe, "--executor", "dask"],
        [*probe, "--workers", "0"],
        [*probe, "--workers", HUGE],
        [*probe, "--time-limit", "step=1e300"],
        [*probe, "--time-limit", "step=nan"],
        [*probe, "--steps", "100000000000"],
        [*probe, "--lr", "inf"],
        [*probe, "--lr", "1e308"],
        [*probe, "--ranks", f"8,{HUGE}"],
        [*probe, "--seeds", f"0,{2**64}"],
        [*probe, "--kwargs", '{"a": "\\ud800"}'],
        ["sweep", str(tmp / "stop-inf.toml"), "--out", str(tmp / "s")],
        ["sweep", str(tmp / "stop-inf.toml"), "--out", str(tmp / "s"), "--cpus-per-task", "inf"],
        ["sweep", str(tmp / "stop-inf.toml"), "--out", str(tmp / "s"), "--workers", HUGE],
        ["certify", "--family", "witness", "--budget", "nan"],
    ]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> list[tuple[list[str], dict]]:
    tmp = tmp_path_factory.mktemp("before-torch")
    lines = refused_lines(tmp)
    return list(zip(lines, run_driver(lines, tmp)))


def test_each_refusal_is_one_line_exit_2_before_torch(refusals):
    bad = not_refused_before_torch(refusals)
    assert not bad, "\n".join(f"kernelgap {' '.join(a)[:120]} → {r}" for a, r in bad)


def test_nothing_was_written(refusals, tmp_path_factory):
    """No refused command created its results folder (``p``, ``s`` or the default ``results``)."""
    folders = {Path(a[a.index("--out") + 1]) for a, _ in refusals if "--out" in a}
    assert folders and not any(folder.exists() for folder in folders)
