"""Progress you can watch: the trainer tells an observer its curve points and its outcome
(changing no number), the command line shows it live on a terminal only, and the bound
curve's report draws the training curves its records keep."""

from __future__ import annotations

import io
import json

import pytest
import torch

from kernelgap.cli import main
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, default_model, train_records
from kernelgap.training.progress import TrainingProgress, number, watch
from kernelgap.training.trainer import train_watched


class Terminal(io.StringIO):
    """A stream that says it is a terminal (what rich and the command line ask)."""

    def isatty(self) -> bool:
        if self.closed:  # as a real stream does
            raise ValueError("I/O operation on closed file")
        return True


def witness_run(**train) -> RunConfig:
    cfg = TrainConfig(**{"mse_steps": 120, "max_steps": 230, **train})
    return RunConfig(family=FamilySpec(name="witness"), model=default_model(rank=16), train=cfg, seed=0).validate()


def ladder_run() -> RunConfig:
    """A product family (trained through its two-candidate sequences), stopping once exact."""
    family = FamilySpec(name="ladder", params={"m": 16, "n": 8})
    model = default_model(rank=8, d_value=16)
    return RunConfig(family=family, model=model, train=TrainConfig(mse_steps=0, max_steps=400), seed=1).validate()


def without_time(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "wall_time_s"}


@pytest.mark.parametrize("make", [lambda: witness_run(stop_below=None), lambda: witness_run(), ladder_run])
def test_an_observer_changes_no_number_and_sees_the_curve(make):
    """Records are equal field for field (all but the wall time) with and without an observer;
    the observer sees the record's curve points in order, phase by phase, then its outcome."""
    run = make()
    (plain,) = train_records([run])
    seen: list[TrainingProgress] = []
    (observed,) = train_records([run], observer=seen.append)
    assert without_time(observed) == without_time(plain)
    *points, last = seen
    assert points and not any(p.done for p in points) and last.done
    steps = [p.step for p in points]
    assert steps == sorted(set(steps)) and steps[0] == 0  # increasing, from the first step
    curve = dict(zip(plain["curve"]["step"], plain["curve"]["max_error"]))
    losses = dict(zip(plain["curve"]["step"], plain["curve"]["loss"]))
    for p in points:  # each point is the record's own (the same reading, not a second one)
        assert p.max_error == (curve[p.step],) and p.loss == (losses[p.step],)
        assert p.phase == ("mse" if p.step < run.train.mse_steps else "max")
        assert p.total == run.train.mse_steps + run.train.max_steps
    assert last.max_error == (plain["train"]["max_error"],) and last.step == plain["steps"]
    assert last.loss == (plain["curve"]["final"]["loss"],) and last.left == 0


def test_observing_adds_no_forward_pass_and_no_reading(monkeypatch):
    """The observer gets the points the trainer computes anyway, in the transfers it makes
    anyway: as many predictions and as many reads to the host (``tolist``) either way."""
    from kernelgap.models import AttentionModel

    calls = {"predict": 0, "tolist": 0}
    predict, tolist = AttentionModel.predict, torch.Tensor.tolist

    def counted(name, real):
        def call(self, *a, **k):
            calls[name] += 1
            return real(self, *a, **k)

        return call

    monkeypatch.setattr(AttentionModel, "predict", counted("predict", predict))
    monkeypatch.setattr(torch.Tensor, "tolist", counted("tolist", tolist))
    run = witness_run(stop_below=None)
    train_records([run])
    alone = dict(calls)
    calls.update(predict=0, tolist=0)
    seen = []
    train_records([run], observer=seen.append)
    assert calls == alone and alone["predict"] > 0 and len(seen) > 5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_an_observer_changes_no_number_on_cuda():
    run = witness_run(stop_below=None, device="cuda")
    (plain,) = train_records([run])
    seen: list[TrainingProgress] = []
    (observed,) = train_records([run], observer=seen.append)
    assert without_time(observed) == without_time(plain)
    assert seen[-1].max_error == (plain["train"]["max_error"],)


def test_a_stack_reports_every_member():
    runs = [witness_run(stop_below=None).model_copy(update={"seed": s}) for s in (0, 1)]
    seen: list[TrainingProgress] = []
    records = train_records(runs, observer=seen.append)
    assert all(len(p.max_error) == 2 and len(p.loss) == 2 for p in seen)
    assert seen[-1].max_error == tuple(r["train"]["max_error"] for r in records)
    assert number((0.5, 0.25)) == "best 0.25 of 2" and number((None,)) == "—" and number((1.5,)) == "1.5"


def test_the_terminal_view_draws_step_loss_and_max_error():
    """On a terminal: the phase, step of total, loss and max error, redrawn in place; the
    record is the one trained without it."""
    run = witness_run(stop_below=None)
    screen = Terminal()
    record = train_watched(run, screen)
    text = screen.getvalue()
    assert "\r" in text  # drawn in place
    assert "350/350" in text and "done" in text and "max error" in text and "loss" in text
    assert f"{record['train']['max_error']:.4g}" in text
    assert without_time(record) == without_time(train_records([run])[0])


def test_nothing_is_shown_where_the_stream_is_not_a_terminal():
    plain = io.StringIO()
    with watch(plain) as observer:
        assert observer is None
    with watch(None) as observer:
        assert observer is None
    closed = Terminal()
    closed.close()
    with watch(closed) as observer:  # a closed stream cannot say it is a terminal
        assert observer is None
    train_watched(witness_run(mse_steps=10, max_steps=10), plain)
    assert plain.getvalue() == ""


def test_the_library_prints_nothing_without_an_observer(capfd):
    train_records([witness_run(mse_steps=60, max_steps=60)])
    out, err = capfd.readouterr()
    assert out == "" and err == ""


ARGS = ["train", "--family", "witness", "--rank", "16", "--mse-steps", "60", "--max-steps", "60", "--json"]


def test_cli_train_shows_progress_on_a_terminal_only(monkeypatch, capsys):
    main(ARGS)
    out, err = capsys.readouterr()
    assert err == ""  # not a terminal: nothing on stderr
    record = json.loads(out)
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    main(ARGS)
    watched = json.loads(capsys.readouterr().out)
    assert "120/120" in screen.getvalue() and "max error" in screen.getvalue()
    assert without_time(watched) == without_time(record)


# -- the bound curve's training curves -----------------------------------------------------------


def record(run_id: str, seed: int, curve: dict | None | str = "absent") -> dict:
    rec = {
        "id": run_id,
        "config": {
            "family": {"name": "ladder", "params": {"m": 16, "n": 8}},
            "model": {"kind": "kernel", "feature_map": "table", "rank": 5, "heads": 1},
        },
        "seed": seed,
        "status": "ok",
        "steps": 120,
        "wall_time_s": 1.0,
        "train": {"max_error": 0.4, "exact_seq_acc": 1.0, "mean_abs_error": 0.1},
    }
    if curve != "absent":
        rec["curve"] = curve
    return rec


def curve(errors: list[float]) -> dict:
    return {
        "every": 50,
        "mse_steps": 0,
        "step": [0, 50, 100][: len(errors)],
        "max_error": errors,
        "loss": errors,
        "final": {"step": 120, "max_error": 0.4, "power": 8.0, "loss": 0.3},
    }


def folder(tmp_path, records: list[dict]):
    from kernelgap.experiments.registry import BUILTIN
    from kernelgap.report.criteria import Results

    runs = tmp_path / "out" / "bound_curve" / "runs"
    runs.mkdir(parents=True)
    for rec in records:
        (runs / f"{rec['id']}.json").write_text(json.dumps(rec))
    return Results(tmp_path / "out", BUILTIN)


def test_the_bound_curve_draws_the_curves_its_records_keep(tmp_path):
    """One line per run with a curve (its last step appended); runs without one are left out."""
    from kernelgap.experiments.bound_curve import experiment as bc
    from kernelgap.reproduction.render import draw_all

    results = folder(tmp_path, [record("a", 0, curve([3.0, 1.2, 0.6])), record("b", 1), record("c", 2, None)])
    section = bc.section(results)
    (line,) = section["training_curves"]
    assert line["id"] == "a" and line["step"] == [0, 50, 100, 120] and line["max_error"] == [3.0, 1.2, 0.6, 0.4]
    summary = {"bound_curve": section}
    drawn = draw_all(summary, tmp_path / "fig", [bc.EXPERIMENT])
    assert drawn["bound_curve_training"] == ["bound_curve_training.png", "bound_curve_training.svg"]
    assert (tmp_path / "fig" / "bound_curve_training.png").stat().st_size > 1000
    text = bc.training_caption(summary)
    assert "1 trained runs" in text and "every 50 steps" in text and "threshold 1/2" in text


def test_old_records_without_a_curve_draw_no_training_figure(tmp_path):
    from kernelgap.experiments.bound_curve import experiment as bc
    from kernelgap.reproduction.render import draw_all

    section = bc.section(folder(tmp_path, [record("b", 1), record("c", 2, None), record("d", 3, curve([]))]))
    assert section["training_curves"] == []
    drawn = draw_all({"bound_curve": section}, tmp_path / "fig", [bc.EXPERIMENT])
    assert "bound_curve_training" not in drawn
    assert not (tmp_path / "fig" / "bound_curve_training.png").exists()


def test_the_threshold_line_is_the_one_exact_threshold(tmp_path, monkeypatch):
    """The dashed line sits at the task's exact threshold, wherever that is defined."""
    from kernelgap.report import figures

    drawn_at = []
    real = figures.plt.Axes.axhline

    def axhline(self, y=0, *a, **k):
        drawn_at.append(y)
        return real(self, y, *a, **k)

    monkeypatch.setattr(figures.plt.Axes, "axhline", axhline)
    monkeypatch.setattr(figures, "EXACT_THRESHOLD", 0.25)
    c = {"label": "run", "step": [0, 50], "max_error": [2.0, 0.0], "mse_steps": 0}
    assert figures.draw_training_curves([c], tmp_path, "t", "title") == ["t.png", "t.svg"]
    assert drawn_at == [0.25]


@pytest.mark.parametrize(
    "first, feature_map, stage, key",
    [({"prune_from": 1.5}, "table", "wide", "pruned"), ({"distill": True}, "mlp_exp", "teacher", "distilled")],
)
def test_a_first_stage_is_watched_before_the_run_and_changes_no_number(first, feature_map, stage, key):
    """A pruned table's wide run and a distilled map's teacher are shown as a first stage
    (its phases prefixed, its end not the run's end), then the run itself from step 0; the
    record is the one trained unwatched."""
    run = RunConfig.parse(
        {
            "family": {"name": "witness"},
            "model": {"feature_map": feature_map, "rank": 16},
            "train": {"mse_steps": 60, "max_steps": 60, **first},
        }
    ).validate()
    (plain,) = train_records([run])
    seen: list[TrainingProgress] = []
    (observed,) = train_records([run], observer=seen.append)
    assert without_time(observed[key]) == without_time(plain[key])  # the first stage's own wall time
    assert without_time({**observed, key: None}) == without_time({**plain, key: None})
    phases = [p.phase for p in seen]
    staged = [i for i, phase in enumerate(phases) if phase.startswith(f"{stage} ")]
    assert staged == list(range(len(staged))) and phases[len(staged) - 1] == f"{stage} done"
    rest = seen[len(staged) :]
    assert rest[0].step == 0 and rest[-1].done and not any(p.done for p in seen[:-1])
    screen = Terminal()
    with watch(screen) as view:
        for p in seen:
            view(p)
    assert f"{stage} mse" in screen.getvalue() or f"{stage} max" in screen.getvalue()
