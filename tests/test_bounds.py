"""Bounds on every number and name a user gives: a value out of range is one line ``error: …``,
exit status 2, and nothing written; a path or name with a newline (or another character that
breaks a line) stays on that one line; a sweep file listing too many runs is refused before
any run is built; a user profile naming an experiment whose step needs a sweep file it lacks
is refused as it loads.

The CLI runs in-process through ``kernelgap.cli.main`` (what maps a ``KernelgapError`` to exit
2), from inside a scratch folder whose content is compared before and after."""

from __future__ import annotations

import contextlib
import io
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.cli import main
from kernelgap.errors import ConfigError, KernelgapError, one_line
from kernelgap.limits import MAX_JSON_DEPTH, MAX_SECONDS, MAX_SWEEP_RUNS, MAX_WORKERS
from kernelgap.probe.config import ProbeConfig
from kernelgap.training import TrainConfig
from test_bad_input import tree_digest

DECAYED = "kernelgap.probe.examples:DecayedLinearAttention"
SWEEP = 'name = "x"\n[family]\nname = "witness"\n'


def run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """``main(argv)`` from ``cwd``: its exit status and stderr."""
    err, code, old = io.StringIO(), 0, os.getcwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(old)
    return code, err.getvalue()


def refused(argv: list[str], cwd: Path) -> str:
    """The one line ``argv`` is refused with; asserts exit 2, one line and nothing changed."""
    before = tree_digest(cwd)
    code, err = run(argv, cwd)
    assert code == 2, (argv, code, err[-2000:])
    assert len(err.splitlines()) == 1 and err.startswith("error: "), (argv, err[-2000:])
    assert tree_digest(cwd) == before, argv
    return err.strip()


@pytest.fixture
def world(tmp_path) -> Path:
    (tmp_path / "stop-inf.toml").write_text(SWEEP + "[train]\nstop_below = inf\n")
    seeds, ranks = ",".join(map(str, range(4000))), ",".join(map(str, range(1, 2501)))
    (tmp_path / "huge.toml").write_text(SWEEP + f"[grid]\nseed = [{seeds}]\nmodel.rank = [{ranks}]\n")
    for name, text in {
        "length-m": 'experiments = ["length"]\n[length]\nm = 100000\n',
        "precision": 'experiments = ["precision"]\n',
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "profile.toml").write_text(text)
    return tmp_path


HUGE = str(10**30)

#: (command line, words its one line holds): each out-of-range value the audit found.
OUT_OF_RANGE = [
    (
        ["probe", DECAYED, "--time-limit", "step=1e300", "--out", "p"],
        "time_limits.step: must be a positive number of seconds (at most 1,000,000), got 1e+300",
    ),
    (["probe", DECAYED, "--workers", HUGE, "--out", "p"], f"--workers must be ≤ {MAX_WORKERS:,}"),
    (["sweep", "stop-inf.toml", "--out", "s", "--workers", HUGE], "--workers must be ≤"),
    (["reproduce", "--workers", HUGE, "--out", "r"], "--workers must be ≤"),
    (["reproduce", "--workers", "0", "--out", "r"], "--workers must be ≥ 1"),
    (
        ["sweep", "stop-inf.toml", "--out", "s"],
        "train.stop_below: must be a finite number ≥ 0 (0: never stop early), got inf",
    ),
    (["sweep", "stop-inf.toml", "--out", "s", "--cpus-per-task", "inf"], "--cpus-per-task must be a finite"),
    (["sweep", "stop-inf.toml", "--out", "s", "--gpus-per-task", "nan"], "--gpus-per-task must be a finite"),
    (["reproduce", "--profile", "length-m", "--out", "r"], "length.m: must be an m that verify checks"),
    (["probe", DECAYED, "--kwargs", '{"a": "\\ud800"}', "--out", "p"], "lone surrogate"),
    (["probe", DECAYED, "--kwargs", '{"a": ' + "[" * 800 + "]" * 800 + "}", "--out", "p"], "nests deeper"),
    (["probe", DECAYED, "--arg", "a=" + "[" * 800 + "]" * 800, "--out", "p"], "nests deeper"),
    (
        ["probe", DECAYED, "--lr", "1e308", "--out", "p"],
        "error: lr: must be a finite number in (0, 1e+100], got 1e+308",
    ),
    (["certify", "--family", "witness", "--budget", "inf"], "--budget must be a finite number"),
]


@pytest.mark.parametrize(("argv", "words"), OUT_OF_RANGE, ids=[" ".join(a)[:60] for a, _ in OUT_OF_RANGE])
def test_out_of_range_values_are_one_line(world, argv, words):
    assert words in refused(argv, world)


def test_a_sweep_of_ten_million_runs_is_refused_from_its_axes(world):
    line = refused(["sweep", "huge.toml", "--out", "s"], world)
    assert f"10,000,000 runs; a sweep has at most {MAX_SWEEP_RUNS:,}" in line


def test_a_user_profile_naming_precision_without_its_sweep_is_refused(world):
    line = refused(["reproduce", "--profile", "precision", "--out", "r"], world)
    assert "'precision' has no sweep file" in line


@pytest.mark.parametrize("name", ["missing\nfile.json", "a\rb", "x\u2028y", "tab\x1bescape", "bad\udcffbyte"])
def test_a_path_with_a_line_breaking_character_stays_one_line(tmp_path, name):
    for argv in (["certify", name], ["check", name], ["sweep", name, "--out", "o"]):
        line = refused(argv, tmp_path)
        assert one_line(name) in line


def test_one_line_escapes_only_what_breaks_a_line():
    assert one_line("a\nb\r\x0b\x0c\x1c\x85\u2028\u2029\udc80") == "a\\nb\\r\\x0b\\x0c\\x1c\\x85\\u2028\\u2029\\udc80"
    assert one_line("plain é ✓\tz") == "plain é ✓\tz"
    assert len(one_line("".join(map(chr, range(0x20)))).splitlines()) == 1


def test_json_nesting_up_to_the_limit_is_taken():
    from kernelgap.args import json_object

    deep = '{"a": ' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}"
    assert json_object(deep, "--kwargs")
    with pytest.raises(KernelgapError, match="nests deeper"):
        json_object('{"a": ' + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH + "}", "--kwargs")


# -- any number, for each bounded flag: runs or refuses in one line, never a traceback ---------

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-0.0", str(2**64), str(MAX_WORKERS), str(MAX_WORKERS + 1)]),
).map(str)


@given(st.sampled_from(["--workers", "--cpus-per-task", "--gpus-per-task"]), NUMBERS)
@settings(max_examples=60, deadline=None)
def test_any_number_for_a_sweep_flag_is_one_line(tmp_path_factory, flag, value):
    """The sweep file is missing, so a value the flag takes is refused by that, in one line too."""
    world = tmp_path_factory.mktemp("sweep")
    line = refused(["sweep", "missing.toml", "--out", "o", flag, value], world)
    assert flag in line or "missing.toml" in line


@given(NUMBERS)
@settings(max_examples=40, deadline=None)
def test_any_number_of_workers_for_reproduce_and_probe_is_one_line(tmp_path_factory, value):
    world = tmp_path_factory.mktemp("workers")
    for argv in (
        ["reproduce", "--profile", "nope", "--workers", value, "--out", "r"],
        ["probe", DECAYED, "--executor", "nope", "--workers", value, "--out", "p"],
    ):
        line = refused(argv, world)
        assert "--workers" in line or "nope" in line


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False), st.integers(-(10**40), 10**40)))
@settings(max_examples=100, deadline=None)
def test_any_number_for_a_bounded_field_is_taken_finite_or_refused(value):
    """The config models and the time limits: a value is taken only finite and within its bounds."""
    for build in (lambda: TrainConfig(lr=value), lambda: TrainConfig(stop_below=value)):
        try:
            taken = build()
        except ConfigError as exc:
            assert len(str(exc).splitlines()) == 1
        else:
            assert all(math.isfinite(v) for v in (taken.lr, taken.stop_below) if v is not None)
    try:
        seconds = ProbeConfig(DECAYED, time_limits={"step": value}).limits["step"]
    except KernelgapError as exc:
        assert len(str(exc).splitlines()) == 1
    else:
        assert 0 < seconds <= MAX_SECONDS


def test_the_property_tests_see_a_refusal_that_is_not_one_line(tmp_path):
    """The helper can fail: a command that succeeds is not a refusal."""
    with pytest.raises(AssertionError):
        refused(["bound", "transcript", "--answers", "2", "--values", "2", "--json"], tmp_path)
