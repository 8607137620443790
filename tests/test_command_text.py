"""The text the commands print, beside what it renders: a run record (training/text.py), a
sweep's status and summary (sweeps/runner.py), a written family (task/text.py), the
constructions' verification (models/text.py) and the transcript bound (theory/text.py)."""

from __future__ import annotations

from rich.table import Table

from kernelgap.models.text import verify_lines
from kernelgap.sweeps.runner import status_lines, summary_lines
from kernelgap.task.text import written_lines
from kernelgap.theory.text import transcript_lines
from kernelgap.training.text import run_lines

RECORD = {
    "id": "abc",
    "status": "ok",
    "steps": 12,
    "wall_time_s": 1.25,
    "train": {"max_error": 0.25, "exact": True, "exact_seq_acc": 1.0, "mean_abs_error": None},
}


def test_run_lines():
    assert run_lines(RECORD) == [
        "run abc  status=ok  steps=12  wall=1.2s",
        "train: max_error=0.2500 exact=True exact_seq_acc=1.0000 mean_abs_error=none",
    ]
    product = {
        **RECORD,
        "train": {
            **RECORD["train"],
            "evaluated": "the whole family",
            "sequences": 10**61,
            "whole_family": {"max_error": 0.125, "exact": True},
        },
    }
    assert run_lines(product)[2:] == [
        "scored on: the whole family, about 10^61 sequences",
        "whole family (exact worst case): max_error=0.1250 exact=True",
    ]


def test_sweep_lines():
    status = {"out": "r", "name": "w", "done": 3, "total": 4, "left": 1, "exact": 2, "diverged": 0}
    assert status_lines({**status, "corrupt": 0, "lock_files": 1}) == [
        "r (w): 3/4 done, 1 left, 2 exact, 0 diverged, 0 corrupted, 1 lock files"
    ]
    summary = {"out": "r", "ran": 2, "done_before": 1, "left": 1, "total": 4, "wall_time_s": 3.0}
    assert summary_lines({**summary, "skipped_locked": [], "set_aside": []}) == [
        "r: ran 2, 1 already done, 1 left of 4 in 3.0s; results.csv written"
    ]
    assert summary_lines({**summary, "skipped_locked": ["a"], "set_aside": ["b", "c"]})[1:] == [
        "1 runs are claimed by another sweep process",
        "2 corrupted result files renamed aside and redone",
    ]


def test_written_lines():
    assert written_lines({"out": "w.json", "sequences": 96, "matching": 16}) == [
        "wrote w.json: 96 sequences, 16 matched queries"
    ]


def test_verify_lines():
    check = {"construction": "rank1", "N": 3, "sequences": 4096, "max_error": 4 / 3, "exact": False}
    payload = {"m": 4, "checks": [{**check, "expected_exact": False, "as_expected": True}]}
    table, verdict = verify_lines(payload)
    assert isinstance(table, Table) and table.row_count == 1 and verdict == "every outcome as expected"
    wrong = {"m": 4, "checks": [{**check, "expected_exact": True, "as_expected": False}]}
    assert verify_lines(wrong)[1] == "not as expected: rank1 at N = 3"


def test_transcript_lines():
    payload = {"answers": 3, "values": 3, "bits_needed": 4.75, "bits_needed_ceil": 5}
    assert transcript_lines(payload) == ["3 answers × log2(3) = 4.75 bits (at least 5 whole bits)"]
    sketch = {"features": 2, "value_dim": 1, "heads": 1, "bits": 2, "capacity_bits": 4, "can_carry": False}
    assert transcript_lines({**payload, **sketch})[1] == (
        "sketch: 2 features × 1 value dim × 1 heads × 2 bits = 4 bits: it cannot carry the answers"
    )


def test_cli_train_prints_the_record_lines(cli):
    code, out, err = cli("train", "--family", "exhaustive", "-p", "m=2", "--mse-steps", "1", "--max-steps", "1")
    lines = out.strip().splitlines()
    assert code == 0, err
    assert lines[0].startswith("run ") and "status=" in lines[0] and lines[1].startswith("train: max_error=")
