"""The exact-wall experiment: a profile that runs it reproduces the table into summary.json,
report.html (figure and table) and docs/results.md's page, each entry with both sides of its
evidence; its settings are refused in one line."""

from __future__ import annotations

import json

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.experiments.exact_wall.experiment import lower_evidence, rows, span, upper_evidence
from kernelgap.experiments.profile import load_profile
from kernelgap.reproduction.pipeline import reproduce
from kernelgap.reproduction.results_page import results_markdown

PROFILE = 'experiments = ["exact_wall"]\n[exact_wall]\nm = "2..3"\ndelta = "2/5,1/2"\n'


@pytest.fixture(scope="module")
def walled(tmp_path_factory):
    profile = tmp_path_factory.mktemp("configs") / "wall"
    profile.mkdir()
    (profile / "profile.toml").write_text(PROFILE)
    out = tmp_path_factory.mktemp("out") / "rep"
    reproduce(profile, out, executor="inline", log=lambda *_: None)
    return out


def test_the_table_reaches_summary_report_and_results_page(walled):
    summary = json.loads((walled / "summary.json").read_text())
    entries = {(e["m"], e["delta"]): e for e in summary["exact_wall"]["entries"]}
    assert set(entries) == {(2, "2/5"), (2, "1/2"), (3, "2/5"), (3, "1/2")}
    # below 1/2 the wall is C(m, ⌊m/2⌋), closed from both sides
    for m, binomial in ((2, 2), (3, 3)):
        e = entries[(m, "2/5")]
        assert (e["lower"], e["upper"]) == (binomial, binomial)
        assert "strict rank" in lower_evidence(e) and "cvc5 unsat" in lower_evidence(e)
        assert "head's max error" in upper_evidence(e) and "NOT" not in upper_evidence(e)
        assert [s["length"] for s in e["tables"]["strict"]["scores"]] == [3, 4]
    # at δ = 1/2, m = 3 is bracketed: lower rank 1, upper rank 2 (rank 1 refuted for the upper order)
    assert span(entries[(3, "1/2")]) == "[1, 2]"
    assert span(entries[(2, "1/2")]) == "1"
    html = (walled / "report.html").read_text()
    part = html.split("<h3>The exact wall on the cube</h3>", 1)[1].split("<h3>", 1)[0]
    assert '<img alt="exact_wall"' in part and "<table" in part and "[1, 2]" in part
    assert (walled / "figures" / "exact_wall.png").is_file()
    page = results_markdown([walled])
    table = page.split("### The exact wall on the cube", 1)[1]
    assert "| m | δ | least exact rank |" in table
    assert len([line for line in table.splitlines() if line.startswith("| 3 | 1/2 | [1, 2] |")]) == 1
    assert [r["least exact rank"] for r in rows(summary["exact_wall"])] == ["2", "1", "3", "[1, 2]"]


@pytest.mark.parametrize(
    "setting, says",
    [
        ('m = "2..9"', "m values from 2 to 6"),
        ('m = "1..3"', "m values from 2 to 6"),
        ('delta = "0.7"', "tolerances in (0, 1/2]"),
        ("rlimit = 0", "rlimit"),
        ("m = 3", "m"),
    ],
)
def test_bad_settings_are_refused_as_the_profile_loads(tmp_path, cli, setting, says):
    (tmp_path / "profile.toml").write_text(f'experiments = ["exact_wall"]\n[exact_wall]\n{setting}\n')
    with pytest.raises(KernelgapError, match="exact_wall") as caught:
        load_profile(tmp_path)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    code, _, err = cli("reproduce", "--profile", str(tmp_path), "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("\n") == 1 and "exact_wall" in err and not (tmp_path / "o").exists()
