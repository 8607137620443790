"""Sweep files, results folders and the local/inline executors."""

import csv
import fcntl
import json
import os

import pytest

from kernelgap.cli import main
from kernelgap.errors import ConfigError
from kernelgap.sweeps import ResultsDir, load_sweep, plan_tasks, run_sweep, run_sweeps, sweep_status
from kernelgap.sweeps.runner import STEP_OVERHEAD, FamilyCost, StackCosts, longest_first
from sweep_helpers import TINY
from sweep_helpers import write_sweep as write


def test_grid_and_variants_expand(tmp_path):
    cfg = write(
        tmp_path,
        TINY + '\n[[variants]]\nmodel.feature_map = "table"\n'
        '[[variants]]\nmodel.feature_map = "mlp_exp"\ntrain.lr = 1e-3\n',
    )
    runs = load_sweep(cfg).runs()
    assert len(runs) == 8
    assert {r.model.feature_map for r in runs} == {"table", "mlp_exp"}
    assert {r.resolved().train.lr for r in runs if r.model.feature_map == "mlp_exp"} == {1e-3}
    assert len({r.run_id() for r in runs}) == 8


def test_variant_family_params_merge_unless_the_variant_names_another_family(tmp_path):
    text = """
        [family]
        name = "ood"
        params = {split = "train", queries_per_class = 4}
        [model]
        rank = 2
        [train]
        mse_steps = 1
        max_steps = 1
        [[variants]]
        family.params.n = 4
        [[variants]]
        family.params = {queries_per_class = 8}
        grid.family.params.n = [8]
        [[variants]]
        family.name = "witness"
        family.params = {reading = "first"}
    """
    params = [r.family.params for r in load_sweep(write(tmp_path, text)).runs()]
    assert params == [
        {"split": "train", "queries_per_class": 4, "n": 4},
        {"split": "train", "queries_per_class": 8, "n": 8},
        {"reading": "first"},
    ]


@pytest.mark.parametrize(
    "edit, key",
    [
        (("[train]", "[train]\nlearning_rate = 0.1"), "learning_rate"),
        (('name = "tiny"', 'name = "tiny"\nbogus = 1'), "bogus"),
        (("model.rank = [1, 2]", "model.rnak = [1, 2]"), "rnak"),
        (("model.rank = [1, 2]", "model.rank = []"), "model.rank"),
        (("model.rank = [1, 2]", "model.rank = [0, 2]"), "model.rank"),
        (("mse_steps = 4", 'mse_steps = "four"'), "train.mse_steps"),
        (("mse_steps = 4", "mse_steps = 4.5"), "train.mse_steps"),
        (("seed = [0, 1]", "seed = 3"), "grid.seed"),
        (("params = {m = 2, length = 2}", "params = {m = 2, size = 2}"), "size"),
        (('name = "exhaustive"', 'name = "nonesuch"'), "family.name"),
    ],
)
def test_config_errors_name_the_key(tmp_path, capsys, edit, key):
    cfg = write(tmp_path, TINY.replace(*edit))
    with pytest.raises(ConfigError, match=key):
        load_sweep(cfg)
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(cfg), "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0]
    assert not (tmp_path / "out").exists()


def test_plan_groups_stackable_runs(tmp_path):
    runs = load_sweep(write(tmp_path, TINY + "\n[[variants]]\ntrain.lr = 0.01\n[[variants]]\ntrain.lr = 0.02\n")).runs()
    tasks = plan_tasks(runs, workers=1)
    assert len(tasks) == 2 and all(len(t) == 4 for t in tasks)
    assert all(len({r.stack_key() for r in t}) == 1 for t in tasks)
    assert sorted(len(t) for t in plan_tasks(runs, workers=4)) == [2, 2, 2, 2]


def test_padding_splits_stacks_only_where_feature_columns_cost(tmp_path, monkeypatch):
    """On a small family every rank shares one stack (a step's cost is mostly fixed); on a
    family with OOD n = 32's sizes the stacks split by rank, each padded by at most one
    step's fixed cost, and joining two neighbouring stacks would pad more."""
    text = TINY.replace("model.rank = [1, 2]", "model.rank = [1, 2, 4, 8, 16, 32, 64, 128]")
    runs = load_sweep(write(tmp_path, text)).runs()
    assert [len(t) for t in plan_tasks(runs, workers=1)] == [16]
    monkeypatch.setattr(FamilyCost, "of", classmethod(lambda cls, run: cls(144_384, 147_968)))
    costs = StackCosts()
    tasks = plan_tasks(runs, workers=1, costs=costs)
    assert len(tasks) > 2 and sorted(r.run_id() for t in tasks for r in t) == sorted(r.run_id() for r in runs)
    assert all(costs.padding(t) <= STEP_OVERHEAD for t in tasks)
    by_rank = sorted(tasks, key=lambda t: -t[0].model.rank)
    assert all(costs.padding(a + b) > STEP_OVERHEAD for a, b in zip(by_rank, by_rank[1:]))


def test_longest_tasks_are_submitted_first(tmp_path):
    """Work = steps × the stack's estimated step cost (:class:`StackCosts`): 44 steps on
    m = 2 before 8 steps on the larger family of m = 3 before 8 steps on m = 2; nothing is
    lost or repeated."""
    text = (
        TINY + "\n[[variants]]\n[[variants]]\nfamily.params = {m = 3, length = 2}\n[[variants]]\ntrain.max_steps = 40\n"
    )
    tasks = plan_tasks(load_sweep(write(tmp_path, text)).runs(), workers=1)
    ordered = longest_first(tasks)
    assert [(t[0].family.params["m"], t[0].train.max_steps) for t in ordered] == [(2, 40), (3, 4), (2, 4)]
    assert sorted(r.run_id() for t in ordered for r in t) == sorted(r.run_id() for t in tasks for r in t)


def test_sweep_resumes_sets_aside_corruption_and_aggregates(tmp_path):
    cfg, out = write(tmp_path, TINY), tmp_path / "out"
    first = run_sweep(cfg, out, executor="inline", progress=False)
    assert (first.total, first.ran) == (4, 4)
    files = sorted((out / "runs").glob("*.json"))
    assert len(files) == 4 and not list((out / "locks").glob("*.lock"))
    record = json.loads(files[0].read_text())
    assert {"config", "seed", "train", "version", "wall_time_s", "status", "steps"} <= set(record)
    again = run_sweep(out, executor="inline", progress=False)  # resume from the folder alone
    assert (again.done_before, again.ran) == (4, 0)
    files[1].write_text('{"id": "trunc')
    assert sweep_status(out)["corrupt"] == 1
    fixed = run_sweep(cfg, out, executor="inline", progress=False)
    assert fixed.ran == 1 and len(fixed.set_aside) == 1
    assert len(list((out / "runs").glob("*.corrupt-*"))) == 1
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 4 and {"train.max_error", "config.model.rank", "seed"} <= set(rows[0])
    status = sweep_status(out)
    assert (status["done"], status["left"], status["corrupt"]) == (4, 0, 0)


def test_sweeps_on_one_pool_train_what_each_would_alone(tmp_path):
    """Two sweeps driven together (longest first across both) write the records each
    writes alone, bitwise but for the wall time; a refused sweep among them trains nothing
    and leaves no folder behind, the others' folders untouched."""
    other = write(tmp_path, TINY.replace("m = 2, length = 2", "m = 3, length = 2"), "other.toml")
    first = write(tmp_path, TINY, "first.toml")
    alone = [
        run_sweep(cfg, tmp_path / f"alone-{i}", executor="local", workers=2, progress=False)
        for i, cfg in enumerate((first, other))
    ]
    together = run_sweeps(
        [(first, tmp_path / "together-0"), (other, tmp_path / "together-1")], workers=2, progress=False
    )
    assert [(s.total, s.ran) for s in together] == [(s.total, s.ran) for s in alone] == [(4, 4), (4, 4)]
    for i in range(2):
        a, b = ResultsDir(tmp_path / f"alone-{i}"), ResultsDir(tmp_path / f"together-{i}")
        ids = a.meta().runs
        assert ids == b.meta().runs
        strip = lambda r: {k: v for k, v in r.items() if k not in ("wall_time_s", "record_sha256")}  # noqa: E731  (the checksum covers the wall time)
        assert [strip(r) for r in a.records(ids)] == [strip(r) for r in b.records(ids)]
        assert (tmp_path / f"together-{i}" / "results.csv").is_file()
    clash = write(tmp_path, TINY.replace("seed = [0, 1]", "seed = [0, 1, 2]"), "clash.toml")
    with pytest.raises(ConfigError, match="different sweep"):
        run_sweeps([(first, tmp_path / "fresh"), (clash, tmp_path / "together-0")], executor="inline", progress=False)
    assert not (tmp_path / "fresh").exists()
    assert len(list((tmp_path / "together-0" / "runs").glob("*.json"))) == 4


def test_a_held_claim_is_skipped_and_a_stale_one_taken(tmp_path):
    cfg, out = write(tmp_path, TINY), tmp_path / "out"
    runs = load_sweep(cfg).runs()
    store = ResultsDir(out)
    store.open_for("tiny", cfg.read_text(), [r.run_id() for r in runs])
    held = os.open(store.locks_dir / f"{runs[0].run_id()}.lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # another sweep working on run 0
    (store.locks_dir / f"{runs[1].run_id()}.lock").write_text('{"pid": 999999}')  # a killed sweep's
    summary = run_sweep(cfg, out, executor="inline", progress=False)
    assert summary.skipped_locked == [runs[0].run_id()]
    assert summary.ran == 3 and store.read(runs[1].run_id()) is not None
    os.close(held)
    assert run_sweep(cfg, out, executor="inline", progress=False).ran == 1


def test_results_folders_are_never_mixed(tmp_path):
    out = tmp_path / "out"
    run_sweep(write(tmp_path, TINY), out, executor="inline", progress=False)
    before = {p.name: p.read_bytes() for p in (out / "runs").iterdir()}
    other = write(tmp_path, TINY.replace("seed = [0, 1]", "seed = [0, 1, 2]"), "other.toml")
    with pytest.raises(ConfigError, match="different sweep"):
        run_sweep(other, out, executor="inline", progress=False)
    assert before == {p.name: p.read_bytes() for p in (out / "runs").iterdir()}
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a kernelgap sweep folder"):
        run_sweep(other, stranger, executor="inline", progress=False)


def test_cli_sweep_local_pool_and_status(tmp_path, capsys):
    cfg, out = write(tmp_path, TINY), tmp_path / "out"
    main(["sweep", str(cfg), "--out", str(out), "--workers", "2", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["ran"] == 4 and summary["left"] == 0
    inline = tmp_path / "inline"
    run_sweep(cfg, inline, executor="inline", progress=False)
    for path in (out / "runs").glob("*.json"):
        a, b = json.loads(path.read_text()), json.loads((inline / "runs" / path.name).read_text())
        assert a["train"]["max_error"] == pytest.approx(b["train"]["max_error"], abs=1e-5)
    main(["sweep", str(out), "--status", "--json"])
    status = json.loads(capsys.readouterr().out)
    assert (status["done"], status["left"]) == (4, 0)


def test_unknown_executor_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(write(tmp_path, TINY)), "--out", str(tmp_path / "o"), "--executor", "dask"])
    assert exc.value.code == 2 and "unknown executor" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_folder_another_sweep_is_opening_is_not_foreign(tmp_path):
    # What a second sweep can see while the first opens the same new folder: its
    # temp files (and sweep.toml), before sweep.json is linked in place.
    root = tmp_path / "shared"
    root.mkdir()
    (root / ".sweep.json.123.tmp").write_text("{")
    (root / "..sweep.json.123.tmp.x1y2.tmp").write_text("{")  # the temp file's own atomic write
    (root / ".sweep.toml.abc.tmp").write_text("")
    ResultsDir(root).open_for("tiny", "name = 'tiny'\n", ["a", "b"])
    assert json.loads((root / "sweep.json").read_text())["runs"] == ["a", "b"]
    assert (root / "sweep.toml").read_text() == "name = 'tiny'\n"
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "sweep.toml").write_text("")
    (stranger / "notes.txt").write_text("someone else's")
    with pytest.raises(ConfigError, match="is not a kernelgap sweep folder"):
        ResultsDir(stranger).open_for("tiny", "", ["a"])
    assert sorted(p.name for p in stranger.iterdir()) == ["notes.txt", "sweep.toml"]


def test_a_feature_map_axis_can_follow_the_registry(tmp_path):
    from kernelgap.models import FEATURE_MAPS

    cfg = write(tmp_path, TINY.replace("model.rank = [1, 2]", 'model.rank = [2]\nmodel.feature_map = ["*", "!table"]'))
    maps = [r.model.feature_map for r in load_sweep(cfg).runs() if r.seed == 0]
    assert maps == [m for m in FEATURE_MAPS if m != "table"]
    bad = write(tmp_path, TINY.replace("model.rank = [1, 2]", 'model.feature_map = ["*", "!nonesuch"]'), "bad.toml")
    with pytest.raises(ConfigError, match="nonesuch: unknown feature map"):
        load_sweep(bad)
