"""The tables of the docs that list a registry, generated from it so that none goes stale
when discovery adds an experiment or a feature map.

Each table sits in its page between ``<!-- generated: NAME (make docs) -->`` and
``<!-- end: NAME -->``; ``make docs`` (``python tools/doc_tables.py``: :func:`refresh_tables`)
rewrites it and ``tests/test_doc_tables.py`` fails while one differs from its registry:

* ``experiments`` (docs/experiments.md): every registered experiment, its title, what its
  step does after the sweep (the first paragraph of the step module's docstring, read without
  importing it) and the runs of its sweep in each built-in profile;
* ``conclusions`` (docs/experiments.md): what each experiment's ``conclusions`` compares (the
  first paragraph of its docstring), the list ``kernelgap compare`` reads;
* ``feature-maps`` (README.md): every registered feature map with the facts its class carries
  (its input, the kernel's sign, log space, learning rate).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

from kernelgap.experiments.profile import load_profile, profile_names
from kernelgap.experiments.registry import BUILTIN
from kernelgap.models.feature_maps import FEATURE_MAPS
from kernelgap.reproduction.render import markdown_table
from kernelgap.sweeps.config import load_sweep

#: What each value of a map's ``projection`` feeds it.
INPUTS = {"linear": "`Wx + c`", "mlp": "`MLP(x)`", None: "`θ[token]`, free"}


def markdown(columns: list[str], rows: list[list]) -> str:
    """A Markdown table of rows given as lists, one cell a column."""
    return "\n".join(markdown_table([dict(zip(columns, row)) for row in rows], columns))


def _first_paragraph(doc: str | None) -> str:
    """A docstring's first paragraph on one line, Sphinx roles and literals as plain code."""
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    return re.sub(r"(?::\w+:)?`{1,2}~?\.?([^`]+?)`{1,2}", r"`\1`", text) or "–"


def _step_doc(exp) -> str:
    """The first paragraph of the docstring of the experiment's step function, read from its
    module's source (a step may import torch); ``–`` without a step."""
    if not exp.step:
        return "–"
    module, _, function = exp.step.partition(":")
    source = Path(importlib.util.find_spec(module, exp.package or None).origin).read_text(encoding="utf-8")
    found = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function]
    return _first_paragraph(ast.get_docstring(found[0]) if found else None)


def _runs(profile, name: str) -> str:
    """What a profile runs of the experiment: its sweep's run count, ``step only``, or ``–``."""
    if name not in profile.experiments:
        return "–"
    sweep = profile.sweep_file(name)
    if sweep is None:
        return "step only"
    runs = _run_count(sweep)
    return f"{runs:,} run{'s' * (runs != 1)}"


@cache
def _run_count(sweep: Path) -> int:
    """The runs of a sweep file (read once a process: loading every profile's takes seconds)."""
    return len(load_sweep(sweep).runs())


def experiments_table() -> str:
    profiles = {p: load_profile(p) for p in profile_names()}
    rows = [[f"`{e.name}`", e.title, _step_doc(e), *(_runs(p, e.name) for p in profiles.values())] for e in BUILTIN]
    return markdown(["experiment", "title", "after the sweep", *profiles], rows)


def conclusions_table() -> str:
    rows = [[f"`{e.name}`", _first_paragraph(inspect.getdoc(e.conclusions))] for e in BUILTIN if e.conclusions]
    return markdown(["experiment", "conclusions"], rows)


def feature_maps_table() -> str:
    rows = [
        [
            f"`{name}`",
            INPUTS[cls.projection],
            "≥ 0" if cls.nonnegative else "signed",
            "log" if cls.log_space else "",
            f"{cls.default_lr:g}",
        ]
        for name, cls in FEATURE_MAPS.items()
    ]
    return markdown(["map", "input u", "kernel", "space", "lr"], rows)


#: Each generated table: its page (relative to the repository) and its generator.
TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "experiments": ("docs/experiments.md", experiments_table),
    "conclusions": ("docs/experiments.md", conclusions_table),
    "feature-maps": ("README.md", feature_maps_table),
}


def refreshed(text: str, name: str, table: str) -> str:
    """``text`` with the table between the markers of ``name`` replaced by ``table``."""
    pattern = re.compile(rf"(<!-- generated: {re.escape(name)} \(make docs\) -->\n).*?(\n<!-- end: {name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"no markers of the generated table {name!r}")
    return pattern.sub(lambda m: m[1] + table + m[2], text)


def refresh_tables(root: str | Path = ".", write: bool = True) -> list[str]:
    """Every generated table that differs from its registry, as ``page: name``; ``write``:
    rewritten from it."""
    stale = []
    for name, (page, make) in TABLES.items():
        path = Path(root) / page
        text = path.read_text(encoding="utf-8")
        if (new := refreshed(text, name, make())) != text:
            stale.append(f"{page}: {name}")
            if write:
                path.write_text(new, encoding="utf-8")
    return stale


if __name__ == "__main__":
    print(*refresh_tables(Path(__file__).resolve().parents[1]), sep="\n")
