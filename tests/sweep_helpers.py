"""The tiny sweep most sweep tests start from, and a writer for sweep files (shared by the
sweep, bad-input and checkpoint tests; the fault tests keep their own in fault_helpers)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

#: Four runs of a few steps on every length-2 sequence over {0,1}^2 (seconds on one core).
TINY = """
name = "tiny"
[family]
name = "exhaustive"
params = {m = 2, length = 2}
[model]
feature_map = "table"
[train]
mse_steps = 4
max_steps = 4
[grid]
model.rank = [1, 2]
seed = [0, 1]
"""


def write_sweep(folder: Path, text: str = TINY, name: str = "sweep.toml") -> Path:
    """``text`` (dedented) as ``folder/name``."""
    path = Path(folder) / name
    path.write_text(textwrap.dedent(text))
    return path


def trained_folder(tmp_path_factory, name: str, text: str) -> Path:
    """The results folder of sweep ``text``, run inline in a fresh temporary folder."""
    from kernelgap.sweeps import run_sweep

    tmp = tmp_path_factory.mktemp(name)
    run_sweep(write_sweep(tmp, text), tmp / "out", executor="inline", progress=False)
    return tmp / "out"


def records(out: Path) -> list[dict]:
    """Every run record of a results folder, by file name."""
    return [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]


def rescored_max_error(out: Path, record: dict) -> float:
    """The max error of a record's run recomputed from its checkpoint, on its whole family
    (the loaded model must be the record's run)."""
    import torch

    from kernelgap.task import error_metrics
    from kernelgap.training.trainer import load_checkpoint

    runs, model, family, _ = load_checkpoint(out / record["checkpoint"]["file"])
    e = record["checkpoint"]["member"]
    assert runs[e].run_id() == record["id"]
    tokens, index = torch.from_numpy(family.tokens).double(), torch.from_numpy(family.index)
    with torch.no_grad():
        pred = model.predict(tokens, index, family.scored_positions)[e]
    return error_metrics(pred, torch.from_numpy(family.targets()[:, family.scored_positions]).double()).max_error
