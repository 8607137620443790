"""More bad input, each refused where the value enters: the transcript bound's sizes and
unused options, bound-curve ranges and seeds, damaged ``reproduce.json``, ``probe.json``
and ``summary.json``, and probe options checked before anything is written.  Every case
gives one stderr line ``error: …`` naming the problem, exit status 2, no traceback,
within seconds, and leaves the folder as it was (hashed before and after; the command runs
from inside it, so relative outputs count too)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import KernelgapError
from kernelgap.limits import MAX_CURVE_POINTS, MAX_RANK
from kernelgap.reproduction.schema import summary_problem, summary_schema
from kernelgap.theory.transcript import transcript_bits_ceil, transcript_bound
from test_bad_input import EXAMPLE, _check, tree_digest

PROBE = ["probe", EXAMPLE, "--steps", "2", "--ranks", "2", "--executor", "inline", "--out", "{w}/pr"]

FILES = {  # folder → (file, text)
    "reproduce-list": ("reproduce.json", "[1]"),
    "reproduce-user-experiments": ("reproduce.json", '{"user_experiments": 3}'),
    "reproduce-not-json": ("reproduce.json", "{not json"),
    "reproduce-huge-int": ("reproduce.json", '{"invocations": 1' + "0" * 5000 + "}"),  # past the digit limit
    "reproduce-invocations": ("reproduce.json", '{"invocations": [{"wall_time_s": 1}]}'),
    "probe-runs-number": ("probe.json", '{"runs": 3}'),
    "probe-not-json": ("probe.json", "{not json"),
    "probe-huge-int": ("probe.json", '{"runs": 1' + "0" * 5000 + "}"),
    "probe-list": ("probe.json", "[1]"),
    "probe-empty": ("probe.json", "{}"),
    "probe-no-suites": ("probe.json", '{"target": "x", "runs": "runs-x"}'),
    "probe-bad-suite": ("probe.json", '{"target": "x", "runs": "runs-x", "suites": [{"name": "w"}]}'),
    "probe-no-runs": ("probe.json", '{"target": "x", "runs": "runs-x", "suites": []}'),
    "probe-out-suites": ("probe.json", '{"suites": 3}'),
    "probe-out-list": ("probe.json", "[1]"),
    "summary-profile": ("summary.json", '{"profile": 3}'),
    "summary-partial": ("summary.json", '{"schema_version": 3, "version": "0", "profile": "p", "paper": {}}'),
}

CASES = [  # (id, argv with {w}, text the one error line must contain)
    (
        "transcript-beyond-a-float",
        ["bound", "transcript", "--answers", str(10**400), "--values", "3"],
        "beyond a float's range",
    ),
    (
        "transcript-unused-heads",
        ["bound", "transcript", "--answers", "3", "--values", "3", "--heads", "-1"],
        "heads must be a positive integer, got -1",
    ),
    (
        "transcript-unused-bits",
        ["bound", "transcript", "--answers", "3", "--values", "3", "--bits", "0"],
        "bits must be a positive integer, got 0",
    ),
    (
        "transcript-unused-value-dim",
        ["bound", "transcript", "--answers", "3", "--values", "3", "--value-dim", "0"],
        "value_dim must be a positive integer",
    ),
    (
        "curve-huge-range",
        ["bound-curve", "--m", "12..100000000", "--queries", "2"],
        f"gives 99,999,989 values of m; a range has at most {MAX_CURVE_POINTS:,}",
    ),
    (
        "curve-huge-m",
        ["bound-curve", "--code", "cw", "--m", "100000000", "--queries", "2"],
        "the cw family at m = 100,000,000 with 2 queries needs about",
    ),
    (
        "curve-huge-queries",
        ["bound-curve", "--code", "ladder", "--m", "16", "--queries", str(10**12)],
        "the ladder family at m = 16 with 1,000,000,000,000 queries needs about",
    ),
    (
        "curve-ladder-seed",
        ["bound-curve", "--code", "ladder", "--m", "16", "--seed", "-1"],
        "family 'ladder': seed: input should be greater than or equal to 0, got -1",
    ),
    (
        "report-reproduce-list",
        ["report", "{w}/reproduce-list"],
        "reproduce.json is not a kernelgap reproduction record: expected a JSON object, got list",
    ),
    (
        "report-user-experiments",
        ["report", "{w}/reproduce-user-experiments"],
        "reproduce.json is not a kernelgap reproduction record: user_experiments: input should be a valid dictionary, got 3",
    ),
    ("report-reproduce-not-json", ["report", "{w}/reproduce-not-json"], "reproduce.json is corrupted (not valid JSON)"),
    ("report-reproduce-huge-int", ["report", "{w}/reproduce-huge-int"], "reproduce.json is corrupted"),
    (
        "report-reproduce-invocations",
        ["report", "{w}/reproduce-invocations"],
        "reproduce.json is not a kernelgap reproduction record: invocations.0.command: field required",
    ),
    (
        "report-probe-junk",
        ["report", "{w}/probe-runs-number"],
        "probe.json is not a kernelgap probe record: runs: input should be a valid string, got 3",
    ),
    ("report-probe-not-json", ["report", "{w}/probe-not-json"], "probe.json is corrupted (not valid JSON)"),
    ("report-probe-huge-int", ["report", "{w}/probe-huge-int"], "probe.json is corrupted"),
    ("report-probe-list", ["report", "{w}/probe-list"], "expected a JSON object, got list"),
    ("report-probe-empty", ["report", "{w}/probe-empty"], "probe.json is not a kernelgap probe record"),
    (
        "report-probe-no-suites",
        ["report", "{w}/probe-no-suites"],
        "probe.json is not a kernelgap probe record: suites: field required",
    ),
    (
        "report-probe-bad-suite",
        ["report", "{w}/probe-bad-suite"],
        "probe.json is not a kernelgap probe record: suites.0.family: field required",
    ),
    ("report-probe-no-runs", ["report", "{w}/probe-no-runs"], "holds no probe results"),
    (
        "results-summary-profile",
        ["results", "{w}/summary-profile"],
        "is not a reproduction summary (profile: input should be a valid string, got 3)",
    ),
    ("results-summary-partial", ["results", "{w}/summary-partial"], "is not a reproduction summary"),
    ("probe-bad-lr", [*PROBE, "--lr", "-1"], "error: lr: must be a finite number in (0, 1e+100], got -1.0"),
    (
        "probe-bad-executor",
        [*PROBE, "--executor", "dask"],
        "error: executor: input should be 'local', 'ray' or 'inline', got 'dask'",
    ),
    ("probe-workers-zero", [*PROBE, "--workers", "0"], "--workers must be ≥ 1, got 0"),
    (
        "probe-empty-interface",
        [*PROBE, "--interface", ""],
        "error: interface: input should be 'sequence' or 'layer', got ''",
    ),
    ("probe-empty-kwargs", [*PROBE, "--kwargs", ""], "--kwargs is not valid JSON"),
    ("probe-huge-kwargs", [*PROBE, "--kwargs", '{"d": 1' + "0" * 5000 + "}"], "--kwargs is not usable JSON"),
    (
        "probe-huge-rank",
        ["probe", EXAMPLE, "--steps", "2", "--ranks", str(10**12), "--out", "{w}/pr"],
        f"ranks: must be a list of ranks in 1..{MAX_RANK:,} or a table of them by suite name, got [{10**12}]",
    ),
    ("probe-negative-seed", [*PROBE, "--seeds", "-1"], "seeds.0: must be an integer in 0..2^64 − 1, got -1"),
    (
        "probe-into-junk-record",
        [*PROBE[:-1], "{w}/probe-out-suites"],
        "holds a probe of another module or other settings",
    ),
    ("probe-into-a-list", [*PROBE[:-1], "{w}/probe-out-list"], "probe.json is not a probe record (a JSON list)"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("more")
    for folder, (name, text) in FILES.items():
        (w / folder).mkdir()
        (w / folder / name).write_text(text)
    return w


@pytest.mark.timeout(120)  # a refusal that trained or built first would take far longer
@pytest.mark.parametrize("case, args, needle", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_leaving_the_folder_as_it_was(world, cli, case, args, needle):
    before = tree_digest(world)
    cwd = os.getcwd()
    os.chdir(world)
    try:
        code, out, err = cli(*[a.replace("{w}", str(world)) for a in args])
    finally:
        os.chdir(cwd)
    _check(code, out, err, needle)
    assert out == "", "a refused command prints nothing on stdout"
    assert tree_digest(world) == before, "files changed (or new ones appeared)"


# -- the transcript bound without the power --------------------------------------------


@pytest.mark.timeout(60)  # a count of 10^23 answers, never enumerated
def test_a_huge_answer_count_is_answered_at_once(cli):
    code, out, err = cli("bound", "transcript", "--answers", str(10**23), "--values", "3", "--features", "1", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["bits_needed_ceil"] == 158496250072115618145374  # ⌈10^23 · log2 3⌉
    assert data["bits_needed"] == pytest.approx(10**23 * math.log2(3)) and data["can_carry"] is False


@pytest.mark.parametrize("values", [2, 3, 5, 6, 7, 10, 255, 256, 257, 10**9 + 7])
def test_whole_bits_equal_the_exact_power(values):
    """Against the exact integer, including the convergents of log2(3), where q·log2(3)
    comes closest to an integer."""
    for answers in [*range(1, 60), 665, 15601, 31867, 79335]:
        assert transcript_bits_ceil(answers, values) == (values**answers - 1).bit_length(), (answers, values)


def test_sketch_options_are_checked_without_features():
    for key in ("value_dim", "heads", "bits"):
        with pytest.raises(KernelgapError, match=f"{key} must be a positive integer"):
            transcript_bound(3, 3, **{key: 0})
    with pytest.raises(KernelgapError, match="heads must be a positive integer"):
        transcript_bound(3, 3, heads=True)  # a bool is no count


# -- the summary's models and its generated schema agree ---------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.0, 1e9]) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


def _minimal_summary(schema: dict) -> dict:
    out = {"schema_version": 3, "version": "0.1.0", "profile": "quick", "paper": {}}
    for key in schema["required"]:
        out.setdefault(key, [] if schema["properties"][key].get("type") == "array" else None)
    return out


@pytest.fixture(scope="module")
def schema() -> dict:
    return summary_schema()  # generated once: a quarter of a second each time


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data())
def test_the_models_agree_with_their_generated_schema(schema, data):
    """:func:`~kernelgap.reproduction.schema.summary_problem` (the models) accepts exactly what
    jsonschema does with the schema generated from them, on a minimal summary with one part
    replaced by generated JSON."""
    summary = _minimal_summary(schema)
    key = data.draw(st.sampled_from(sorted(summary) + ["invocations", "commands", "feature_maps"]))
    if data.draw(st.booleans()) and key in ("witness", "series", "length", "probes", "invocations"):
        item = data.draw(
            st.dictionaries(
                st.sampled_from(["rank", "seed", "command", "name", "max_error", "exact"]), JSON, max_size=4
            )
        )
        summary[key] = [item] if key != "witness" else {"runs": [item]}
    elif data.draw(st.booleans()):
        summary.pop(key, None)
    else:
        summary[key] = data.draw(JSON)
    ours = summary_problem(summary) is None
    assert ours == jsonschema.Draft202012Validator(schema).is_valid(summary), (summary, summary_problem(summary))
