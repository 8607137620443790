"""The reproduction pipeline end to end on a tiny profile."""

import json
import re

import jsonschema
import pytest

from kernelgap.errors import KernelgapError
from kernelgap.experiments.profile import load_profile
from kernelgap.reproduction import build_report
from kernelgap.reproduction.pipeline import reproduce
from kernelgap.reproduction.render import comparison_rows
from kernelgap.reproduction.schema import summary_schema

SCHEMA = summary_schema()

TINY = {
    "profile.toml": 'experiments = ["witness", "series", "ood", "length", "bound_curve"]\n[length]\nm = 2\n'
    '[bound_curve]\ncode = "hadamard"\nm = "12..16..4"\nqueries = 8\n',
    "series.toml": """name = "series"
[family]
name = "hadamard"
[model]
feature_map = "table"
[train]
lr = 0.03
mse_steps = 200
max_steps = 400
[grid]
seed = [0, 1]
[[variants]]
family.params = {m = 12, n = 3}
grid.model.rank = [1, 2, 3, 6]
[[variants]]
family.params = {m = 12, n = 4}
grid.model.rank = [2, 3, 4, 8]
""",
    "witness.toml": """name = "witness"
[family]
name = "witness"
[model]
kind = "kernel"
[train]
mse_steps = 5
max_steps = 5
[grid]
model.rank = [1, 16]
seed = [0]
[[variants]]
model.feature_map = "table"
[[variants]]
model.kind = "softmax"
""",
    "ood.toml": """name = "ood"
[family]
name = "ood"
params = {n = 4, split = "train", queries_per_class = 2, test_queries_per_class = 1}
[test_family]
params = {split = "test"}
[model]
feature_map = "mlp_exp"
[train]
mse_steps = 5
max_steps = 5
[grid]
model.rank = [1, 4]
seed = [0]
[[variants]]
model.kind = "kernel"
[[variants]]
model.kind = "softmax"
""",
    "length.toml": """name = "length"
[family]
name = "exhaustive"
params = {m = 2, length = 1}
[model]
feature_map = "mlp_exp"
rank = 1
[train]
mse_steps = 5
max_steps = 5
[grid]
family.params = [{m = 2, length = 1}, {m = 2, length = 3}]
""",
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("configs")
    (root / "tiny").mkdir()
    for name, text in TINY.items():
        (root / "tiny" / name).write_text(text)
    out = tmp_path_factory.mktemp("out") / "rep"
    logs = []
    reproduce(root / "tiny", out, executor="inline", log=logs.append)
    return root, out, logs


def test_summary_validates_against_schema(tiny):
    _, out, _ = tiny
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.validate(summary, SCHEMA)
    assert json.loads((out / "summary.schema.json").read_text()) == SCHEMA  # the schema beside it
    assert summary["profile"] == "tiny"
    w = summary["witness"]
    assert w["certified_rank"] == 16 and w["certificate"]["bounds"]["trace"]["rank"] == 11
    assert w["constructed"]["rank"] == 16 and w["constructed"]["exact"] and w["constructed"]["sequences"] == 736
    series = summary["series"]
    assert [f["n"] for f in series] == [3, 4] and all(f["constructed_exact"] for f in series)
    assert [f["certified_rank"] for f in series] == [f["constructed_rank"] for f in series] == [3, 4]
    for f in series:  # the theorem: nothing trained is exact below the certificate
        assert f["exact_below_certificate"] == []
        assert all(not r["exact"] for r in f["trained"]["table"]["runs"] if r["rank"] < f["certified_rank"])
    assert {r["rank"] for r in summary["witness"]["runs"]} == {1, 16}
    assert len(summary["witness"]["softmax"]) == 1
    assert summary["ood"]["scales"][0]["test_gap_share"] > 0.5
    constructed = {r["N"]: r for r in summary["length"] if r["source"] == "constructed"}
    assert constructed[1]["exact"] and constructed[2]["exact"] and not constructed[3]["exact"]
    from kernelgap.models import feature_map_class

    trained = {r["feature_map"] for r in summary["witness"]["runs"]}
    assert trained <= set(summary["feature_maps"])  # each map's facts travel with its runs
    for name, facts in summary["feature_maps"].items():
        assert facts == feature_map_class(name).facts()


def test_report_is_read_at_a_glance(tiny):
    from kernelgap.report.glance import html_blocks, too_long

    _, out, _ = tiny
    page = (out / "report.html").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert too_long(html_blocks(page)) == []
    cert = summary["witness"]["certified_rank"]
    glance = page[page.index("<h2>At a glance</h2>") : page.index("<h2>The paper beside ours</h2>")]
    assert (
        f"<li>One kernel head needs r ≥ {cert} on the witness family (certified, m = 24). <em>(firm)</em></li>"
        in glance
    )
    assert "<li>Rank 1 is exact up to N = 2 and fails at N = 3." in glance
    sizes = [
        f["n"] for f in summary["series"] if f["constructed_exact"] and f["constructed_rank"] == f["certified_rank"]
    ]
    assert f"at the certified rank on {len(sizes)} of {len(summary['series'])} Hadamard families (n = 3…4)." in glance
    assert sizes == [3, 4]


def test_report_is_self_contained(tiny):
    _, out, _ = tiny
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3
    for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert ref.startswith("data:") or (out / ref).exists(), ref
    for fig in ("witness_error_vs_rank", "ood_accuracy_vs_rank", "length_transition", "bound_curve"):
        assert (out / "figures" / f"{fig}.png").stat().st_size > 1000
        assert (out / "figures" / f"{fig}.svg").exists()


def test_rerun_reuses_finished_runs(tiny):
    root, out, _ = tiny
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/runs/*.json")}
    logs = []
    reproduce(root / "tiny", out, executor="inline", log=logs.append)
    assert any("0 trained" in line for line in logs if line.startswith("[witness]"))
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/runs/*.json")} == before


def test_report_rebuilds_from_results_alone(tiny):
    _, out, _ = tiny
    before = json.loads((out / "summary.json").read_text())
    (out / "report.html").unlink()
    build_report(out, log=lambda *_: None)
    assert (out / "report.html").exists()
    after = json.loads((out / "summary.json").read_text())
    assert after.get("wall_time_s") == before["wall_time_s"]  # a rebuild keeps the recorded wall time


def test_reproduce_json_is_read_once_by_a_report_and_by_a_rerun(tiny, tmp_path, monkeypatch):
    """A report reads the folder's record once and passes it on; a rerun reads it once more,
    where it claims the folder (its steps are told whether their files carry checksums)."""
    import shutil

    import kernelgap.reproduction.record as record

    root, out, _ = tiny
    copy = tmp_path / "rep"
    shutil.copytree(out, copy)
    reads = []
    real = record.read_json
    monkeypatch.setattr(record, "read_json", lambda path: reads.append(path) or real(path))
    build_report(copy, log=lambda *_: None)
    assert reads == [copy / "reproduce.json"]
    reads.clear()
    reproduce(root / "tiny", copy, executor="inline", log=lambda *_: None)
    assert reads == [copy / "reproduce.json"] * 2


def test_a_stopped_invocation_counts_its_time(tiny, tmp_path, monkeypatch):
    import shutil

    from kernelgap.experiments.bound_curve import step

    root, out, _ = tiny
    copy = tmp_path / "rep"
    shutil.copytree(out, copy)
    (copy / "bound_curve" / "curve.json").unlink()

    def stop(*_):
        raise KernelgapError("stopped here")

    monkeypatch.setattr(step, "curve", stop)  # the pipeline looks the step up when it runs it
    with pytest.raises(KernelgapError, match="stopped here"):
        reproduce(root / "tiny", copy, executor="inline", log=lambda *_: None)
    monkeypatch.undo()
    reproduce(root / "tiny", copy, executor="inline", log=lambda *_: None)
    runs = json.loads((copy / "reproduce.json").read_text())["invocations"]
    assert [r["status"] for r in runs[-2:]] == ["stopped: KernelgapError", "done"]
    summary = json.loads((copy / "summary.json").read_text())
    assert summary["wall_time_s"] == pytest.approx(sum(r["wall_time_s"] for r in runs), abs=0.11)


def test_comparison_rows_say_something_for_every_row(tiny):
    _, out, _ = tiny
    rows = comparison_rows(json.loads((out / "summary.json").read_text()))
    assert len(rows) >= 5
    assert all(r["note"] and r["paper"] and r["ours"] for r in rows)


def test_unknown_profile_and_foreign_folder(tiny, tmp_path):
    root, out, _ = tiny
    with pytest.raises(KernelgapError, match="unknown profile 'nope'"):
        load_profile("nope")
    (tmp_path / "x.txt").write_text("keep me")
    with pytest.raises(KernelgapError, match="not a kernelgap reproduction folder"):
        reproduce(root / "tiny", tmp_path, executor="inline", log=lambda *_: None)
    assert (tmp_path / "x.txt").read_text() == "keep me"


def test_report_on_empty_folder_is_user_error(tmp_path):
    with pytest.raises(KernelgapError, match="no reproduction results"):
        build_report(tmp_path, log=lambda *_: None)


def test_results_page_is_written_from_the_summary(tiny, cli, tmp_path):
    from kernelgap.report.glance import markdown_blocks, outline, too_long
    from kernelgap.reproduction.render import main_findings, sentences

    def flat(items) -> list[str]:
        return [t for i in items for t in (i.text, *flat(i.items))]

    _, out, _ = tiny
    summary = json.loads((out / "summary.json").read_text())
    page = tmp_path / "results.md"
    code, _, err = cli("results", str(out), "--out", str(page))
    assert code == 0, err
    text = page.read_text()
    assert "## tiny profile" in text and f"kernelgap {summary['version']}" in text
    for sentence in sentences(summary).values():  # every experiment's sentence, each line of its outline verbatim
        assert all(item in text for item in flat(outline(sentence)))
    assert too_long(markdown_blocks(text)) == []  # no paragraph over 600 characters, no cell over 300
    found = main_findings(summary)
    assert found and all(f"- {f.text} *(" in text for f in found)  # the headline screen, first
    assert text.index("### At a glance") < text.index("### The paper beside ours")
    assert f"r ≥ {summary['witness']['certified_rank']}" in text  # the paper-beside-ours table
    assert (
        "### Where the time went" in text
        and f"| series | {summary['timing']['experiments']['series']['runs']} |" in text
    )
    code, _, err = cli("results", str(tmp_path / "nothing"))
    assert code == 2 and err.count("\n") == 1 and "no readable summary.json" in err


def test_a_second_reproduction_of_a_profile_is_compared_not_repeated(tiny, cli, tmp_path):
    """Two folders of one profile: the first gets its section, the second the conclusions it
    differs on (here one planted flip), with the CPU kernels each ran on."""
    import shutil

    _, out, _ = tiny
    other = tmp_path / "other"
    shutil.copytree(out, other)
    summary = json.loads((other / "summary.json").read_text())
    assert {i["cpu_capability"] for i in summary["invocations"]} <= {"default", "avx2", "avx512"}
    (row,) = [r for r in summary["length"] if r["source"] == "constructed" and r["N"] == 3]
    row["exact"] = True
    (other / "summary.json").write_text(json.dumps(summary))
    page = tmp_path / "results.md"
    code, _, err = cli("results", str(out), str(other), "--out", str(page))
    assert code == 0, err
    text = page.read_text()
    assert text.count("## tiny profile") == 2 and text.count("### Every experiment") == 1
    assert f"## tiny profile again: `{out}` against `{other}`" in text
    assert "conclusions differ" in text and "| length |" in text and "kernels" in text
    for invocation in summary["invocations"]:  # the CPU each ran on, named on the page
        assert isinstance(invocation["cores"], int) and invocation["cores"] >= 1
        if invocation.get("cpu_model"):
            assert f"kernels on {invocation['cpu_model']} ({invocation['cores']} cores)" in text


def test_summary_says_where_the_time_went(tiny):
    """Per experiment: its runs, their summed training time (from the records), its step's wall
    time (from reproduce.json); and the sweeps phase."""
    _, out, _ = tiny
    summary = json.loads((out / "summary.json").read_text())
    invocations = json.loads((out / "reproduce.json").read_text())["invocations"]  # reruns add theirs
    timing = summary["timing"]
    assert timing["sweeps_s"] == pytest.approx(sum(i["sweeps_s"] for i in invocations), abs=0.051)
    assert 0 < timing["sweeps_s"] <= summary["wall_time_s"]
    per = timing["experiments"]
    assert set(per) == {"witness", "series", "ood", "length", "bound_curve"}
    for name, row in per.items():
        records = [json.loads(p.read_text()) for p in (out / name).rglob("runs/*.json")]
        stacks = {}  # runs trained together share one checkpoint: the stack's time is its slowest member's
        for r in records:
            stacks[r["checkpoint"]["file"]] = max(stacks.get(r["checkpoint"]["file"], 0), r["wall_time_s"])
        assert row["runs"] == len(records) and row["train_s"] == pytest.approx(sum(stacks.values()), abs=0.051)
        assert row["train_s"] <= sum(r["wall_time_s"] for r in records) + 0.051
        steps = sum(i["steps_s"].get(name, 0) for i in invocations)
        assert row["step_s"] == pytest.approx(steps, abs=0.051)
    assert per["bound_curve"]["runs"] == 0 and "bound_curve" in invocations[0]["steps_s"]  # certificates only
    assert per["series"]["runs"] == 16
