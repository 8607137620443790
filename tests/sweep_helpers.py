"""The tiny sweep most sweep tests start from, and a writer for sweep files (shared by the
sweep, bad-input and checkpoint tests; the fault tests keep their own in fault_helpers)."""

from __future__ import annotations

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
