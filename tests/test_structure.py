"""The package's shape: imports flow one way, with no cycle (lazy imports included),
and the light layers stay light."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "kernelgap"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """Every module ``name`` imports anywhere in its file (function bodies included):
    kernelgap modules by full name, other packages by their top-level name."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in MODULES else base)
    return {m if m.startswith("kernelgap") else m.split(".")[0] for m in out}


def step_modules() -> set[str]:
    """The modules the pipeline imports by name: every built-in experiment's after-sweep step."""
    from kernelgap.experiments.registry import BUILTIN

    return {importlib.util.resolve_name(e.step.partition(":")[0], e.package) for e in BUILTIN if e.step}


GRAPH = {name: imports_of(name) for name in MODULES}
GRAPH["kernelgap.experiments.pipeline"] |= step_modules()  # lazy by name, but imports all the same

#: The torch-free part of the experiments: what the report may import.
REPORT_PARTS = {"kernelgap.experiments", "kernelgap.experiments.base", "kernelgap.experiments.registry"} | {
    m
    for m in MODULES
    if re.fullmatch(r"kernelgap\.experiments\.\w+(\.experiment)?", m)
    and (m.endswith(".experiment") or MODULES[m].name == "__init__.py")
}


def closure(name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        for dep in GRAPH.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in GRAPH:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in GRAPH[v]:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert cycles() == []


def test_nothing_imports_the_cli():
    assert [m for m, deps in GRAPH.items() if "kernelgap.cli" in deps] == []


@pytest.mark.parametrize(
    "layer, forbidden",
    [
        (
            "kernelgap.task",
            {
                "torch",
                "kernelgap.models",
                "kernelgap.theory",
                "kernelgap.training",
                "kernelgap.sweeps",
                "kernelgap.experiments",
                "kernelgap.report",
            },
        ),
        (
            "kernelgap.models",
            {
                "kernelgap.theory",
                "kernelgap.training",
                "kernelgap.sweeps",
                "kernelgap.experiments",
                "kernelgap.report",
                "kernelgap.probe",
            },
        ),
        (
            "kernelgap.theory",
            {"kernelgap.training", "kernelgap.sweeps", "kernelgap.experiments", "kernelgap.report", "kernelgap.probe"},
        ),
        (
            "kernelgap.training",
            {"kernelgap.sweeps", "kernelgap.experiments", "kernelgap.report", "kernelgap.probe", "kernelgap.theory"},
        ),
        ("kernelgap.sweeps", {"kernelgap.experiments", "kernelgap.report", "kernelgap.probe"}),
        (
            "kernelgap.report",
            {
                "torch",
                "kernelgap.models",
                "kernelgap.training",
                "kernelgap.sweeps",
                "kernelgap.probe",
                "kernelgap.theory",
            },
        ),
    ],
)
def test_layers_import_one_way(layer, forbidden):
    """A layer's modules, and everything they import in turn, stay out of the layers above."""
    for name in (m for m in GRAPH if m == layer or m.startswith(layer + ".")):
        reached = closure(name)
        bad = {f for f in forbidden if any(r == f or r.startswith(f + ".") for r in reached)}
        assert not bad, f"{name} reaches {sorted(bad)}"


def test_the_report_reaches_only_the_torch_free_part_of_the_experiments():
    """The report imports the registry and each experiment's ``experiment.py`` (and, through
    them, nothing that trains); the steps, the profiles and the pipeline stay out of reach."""
    assert {"kernelgap.experiments.witness.experiment", "kernelgap.experiments.registry"} <= REPORT_PARTS
    assert "kernelgap.experiments.witness.step" not in REPORT_PARTS
    forbidden = {
        "torch",
        "kernelgap.models",
        "kernelgap.training",
        "kernelgap.sweeps",
        "kernelgap.probe",
        "kernelgap.theory",
    }
    for name in (m for m in GRAPH if m.startswith("kernelgap.report") or m in REPORT_PARTS):
        reached = closure(name)
        bad = {r for r in reached if r.startswith("kernelgap.experiments") and r not in REPORT_PARTS}
        bad |= {f for f in forbidden if any(r == f or r.startswith(f + ".") for r in reached)}
        assert not bad, f"{name} reaches {sorted(bad)}"


def test_steps_are_imported_only_by_the_pipeline():
    """Steps are loaded by name when they run; only the pipeline (and steps, from the helpers
    they share) import them."""
    steps = step_modules()
    assert {"kernelgap.experiments.witness.step", "kernelgap.experiments.steps"} <= steps
    for name, deps in GRAPH.items():
        if name != "kernelgap.experiments.pipeline" and name not in steps:
            assert not deps & steps, f"{name} imports {sorted(deps & steps)}"


def test_no_reference_leads_outside_the_repository():
    """No mention of a specification or an issue tracker the repository does not contain."""
    pattern = re.compile(r"\bSPEC\b|issue ?#")
    hits = []
    for folder in ("src", "tests", "examples", "benchmarks", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".md", ".toml", ".json"} and path != Path(__file__):
                hits += [
                    f"{path.relative_to(ROOT)}:{n}"
                    for n, line in enumerate(path.read_text().splitlines(), 1)
                    if pattern.search(line)
                ]
    hits += [
        f"README.md:{n}"
        for n, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_report_rendering_never_loads_torch(tmp_path):
    """Rebuilding a report is file work: importing the report layer pulls in no torch."""
    code = (
        "import sys, kernelgap.report, kernelgap.report.render, kernelgap.report.summary, "
        "kernelgap.report.schema, kernelgap.experiments.registry; "
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:3]"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
