"""The argument types of kernelgap.args: one range grammar for every flag and file value that
takes a set of integers, and the key=value, integer-list, JSON and argument-map texts."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from kernelgap.args import (
    MAX_RANGE_VALUES,
    Flag,
    argument_map,
    field_flags,
    given_fields,
    int_list,
    json_object,
    key_values,
    number_map,
    parse_range,
    suite_ranks,
)
from kernelgap.errors import KernelgapError
from kernelgap.limits import MAX_CURVE_POINTS


@pytest.mark.parametrize(
    "text, values",
    [
        ("12", [12]),
        ("12..16", [12, 13, 14, 15, 16]),
        ("12..24..4", [12, 16, 20, 24]),
        ("12..25..4", [12, 16, 20, 24]),  # B itself only where the step lands on it
        ("12,24", [12, 24]),
        ("24,12,12", [12, 24]),  # sorted, each once
        ("1..3,8", [1, 2, 3, 8]),
        ("3..11..4,4..5", [3, 4, 5, 7, 11]),
        (" 3 , 5..6 ", [3, 5, 6]),
        ("-2..1", [-2, -1, 0, 1]),
    ],
)
def test_the_range_grammar(text, values):
    assert parse_range(text, "--m") == values


def test_a_repeated_flag_is_one_list():
    assert parse_range(["5", "4,4", "1..2"], "--length", "N", least=1) == [1, 2, 4, 5]
    assert parse_range(["3..5..2", "4"], "--length") == [3, 4, 5]


@pytest.mark.parametrize(
    "text, message",
    [
        ("x", "--m must look like A, A..B, A..B..STEP (integers) or a comma list of them; got 'x'"),
        ("", "--m must look like"),
        ("12..", "--m must look like"),
        ("12...", "--m must look like"),
        ("1,2,x", "--m must look like"),
        ("3,,4", "--m must look like"),
        ("1.5", "--m must look like"),
        ("1_000", "--m must look like"),
        ("9" * 5000, "--m must look like"),  # more digits than int() reads
        ("12..24..0", "--m '12..24..0': the step of 12..24..0 must be ≥ 1"),
        ("12..24..-4", "the step of 12..24..-4 must be ≥ 1"),
        ("4..2", "--m '4..2': the range 4..2 is empty"),
        ("3,10..5", "--m '3,10..5': the range 10..5 is empty"),
        ("1..1", "--m '1..1': each m must be ≥ 2, got 1"),
        ("5,1", "--m '5,1': each m must be ≥ 2, got 1"),
        ("2..5000..2", "--m '2..5000..2' gives 2,500 values of m; a range has at most 1,000"),
    ],
)
def test_bad_ranges_are_one_line(text, message):
    with pytest.raises(KernelgapError) as exc:
        parse_range(text, "--m", "m", least=2)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert len(str(exc.value)) < 250


@pytest.mark.timeout(60)  # listing 2..10^30 would never end
def test_a_range_is_counted_before_it_is_listed():
    assert MAX_RANGE_VALUES == MAX_CURVE_POINTS
    assert len(parse_range(f"2..{MAX_RANGE_VALUES + 1}", "--m")) == MAX_RANGE_VALUES
    with pytest.raises(KernelgapError, match="a range has at most"):
        parse_range(f"2..{MAX_RANGE_VALUES + 2}", "--m")
    with pytest.raises(KernelgapError, match="a range has at most"):
        parse_range(f"2..{10**30}", "--m")


def test_the_union_is_counted_too():
    half = MAX_RANGE_VALUES // 2 + 1
    assert len(parse_range(f"1..{half},1..{half}", "--m")) == half  # overlapping items count once
    with pytest.raises(KernelgapError, match=f"gives {2 * half:,} values"):
        parse_range(f"1..{half},{half + 1}..{2 * half}", "--m")


def test_key_values():
    assert key_values([" m = 8", "n=3", "x="]) == {"m": "8", "n": "3", "x": ""}
    for bad in ("m", "=3"):
        with pytest.raises(KernelgapError, match=f"parameter '{bad}' is not key=value"):
            key_values([bad])


def test_json_object():
    assert json_object('{"a": [1]}', "--kwargs") == {"a": [1]}
    with pytest.raises(KernelgapError, match="--kwargs is not valid JSON"):
        json_object("{", "--kwargs")
    with pytest.raises(KernelgapError, match="--kwargs must be a JSON object, got list"):
        json_object("[1]", "--kwargs")


def test_integer_lists_keep_their_order():
    assert int_list("2,0,2", "--seeds") == [2, 0, 2]
    with pytest.raises(KernelgapError, match="--seeds expects comma-separated integers, got '1,x'"):
        int_list("1,x", "--seeds")
    with pytest.raises(KernelgapError, match="--seeds is empty"):
        int_list(",", "--seeds")


def test_suite_ranks():
    assert suite_ranks(["8,16", "32"]) == [8, 16, 32]
    assert suite_ranks(["witness=8,16", "ood-n4=4"]) == {"witness": [8, 16], "ood-n4": [4]}
    assert suite_ranks(["witness=8", "ood-n4="]) == {"witness": [8], "ood-n4": []}  # a suite left out
    with pytest.raises(KernelgapError, match="--ranks is empty"):
        suite_ranks([","])
    with pytest.raises(KernelgapError, match="--ranks witness expects comma-separated integers"):
        suite_ranks(["witness=a"])


def test_argument_map():
    assert argument_map(["dim=d_model", "heads=1", "causal=false", "name=elu", "f=rank"]) == {
        "dim": "d_model",
        "heads": 1,
        "causal": False,
        "name": "elu",
        "f": "rank",
    }


def test_readers_of_pairs_name_their_flag():
    assert number_map(["step=2.5", "check=x"], "--time-limit") == {"step": 2.5, "check": "x"}
    with pytest.raises(KernelgapError, match="--time-limit 'step' is not key=value"):
        number_map(["step"], "--time-limit")
    with pytest.raises(KernelgapError, match="--arg 'heads' is not key=value"):
        argument_map(["heads"])


class Fields(BaseModel):
    target: str = Field(description="the module")
    rank: int | None = Field(16, description="features per head")
    lr: float | None = Field(None, description="learning rate (default: calibrated)")
    distill: bool = Field(False, description="start from a table")
    time_limits: dict = Field({}, description="seconds per phase")


def test_a_field_becomes_a_flag_with_its_description_and_default():
    flags = {"time_limits": Flag("--time-limit", number_map, many=True, metavar="PHASE=SECONDS")}
    made = {p.name: p for p in field_flags(Fields.model_fields, flags)}
    assert list(made) == list(Fields.model_fields)
    assert made["target"].default.default is ... and made["target"].annotation is str  # an argument
    assert made["rank"].default.param_decls == ("--rank",) and made["rank"].annotation == int | None
    assert made["rank"].default.help == "Features per head (default 16)."
    assert made["lr"].default.help == "Learning rate (default: calibrated)."  # says its default itself
    assert made["distill"].default.param_decls == ("--distill/--no-distill",)
    assert made["time_limits"].default.param_decls == ("--time-limit",)
    assert made["time_limits"].annotation == list[str] | None and made["time_limits"].default.metavar == "PHASE=SECONDS"
    assert all(p.default.default is None for name, p in made.items() if name != "target")  # not given: None


def test_given_fields_are_those_given_read_by_their_flag():
    flags = {"time_limits": Flag("--time-limit", number_map, many=True)}
    given = {"target": "m:M", "rank": None, "lr": 0.1, "distill": False, "time_limits": ["step=3"]}
    assert given_fields(given, flags) == {"target": "m:M", "lr": 0.1, "distill": False, "time_limits": {"step": 3.0}}
