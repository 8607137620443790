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


def discovered_modules() -> dict[str, set[str]]:
    """The modules a registry imports by listing its package rather than by an import
    statement: every built-in experiment's ``experiment.py``, every feature map's module and
    every family builder's module, as the registries hold them."""
    from kernelgap.experiments.registry import BUILTIN
    from kernelgap.models.feature_maps import FEATURE_MAPS
    from kernelgap.task import FAMILIES

    return {
        "kernelgap.experiments.registry": {f"{e.package}.experiment" for e in BUILTIN},
        "kernelgap.models.feature_maps": {cls.__module__ for cls in FEATURE_MAPS.values()},
        "kernelgap.task.families": {fn.__module__ for fn in FAMILIES.values()},
    }


GRAPH = {name: imports_of(name) for name in MODULES}
GRAPH["kernelgap.reproduction.pipeline"] |= step_modules()  # lazy by name, but imports all the same
for _registry, _found in discovered_modules().items():
    GRAPH[_registry] |= _found  # imported by listing the package, but imported all the same

#: The package's layers, bottom first: every top-level module and package of kernelgap, each
#: in one layer.  A module imports only within its own top-level package or from a lower
#: layer; the packages of one layer are independent of each other.  The report kit
#: (``kernelgap.report``) reads result files by the task's thresholds and nothing else, so it
#: sits beside the models, below everything that trains; the assembler that iterates the
#: experiments (``kernelgap.reproduction``) sits above them.
LAYERS: list[set[str]] = [
    {"kernelgap", "kernelgap.errors"},
    # results folders: their kind, and writing inside one through no link (io writes through it)
    {"kernelgap.folders"},
    {"kernelgap.io", "kernelgap.limits", "kernelgap.validation"},
    # the command-line value grammar (ranges, lists, key=value), above the limits; a run's seed
    # and device names; exact rationals from text (δ)
    {"kernelgap.args", "kernelgap.run_values", "kernelgap.rationals"},
    {"kernelgap.task"},
    {"kernelgap.models", "kernelgap.report"},
    {"kernelgap.theory", "kernelgap.training"},
    {"kernelgap.sweeps"},
    {"kernelgap.probe"},
    {"kernelgap.experiments"},
    {"kernelgap.reproduction"},
    {"kernelgap.cli"},
]


def top(name: str) -> str:
    """The top-level module or package of kernelgap that ``name`` belongs to."""
    return ".".join(name.split(".")[:2])


def layer_of(name: str) -> int:
    return next(k for k, layer in enumerate(LAYERS) if top(name) in layer)


#: The torch-free part of the experiments, what the report's assembly may import: the
#: package, its base and registry, and every module of an experiment folder but its step.
REPORT_PARTS = {"kernelgap.experiments", "kernelgap.experiments.base", "kernelgap.experiments.registry"} | {
    m
    for m in MODULES
    if re.fullmatch(r"kernelgap\.experiments\.\w+(\.\w+)?", m)
    and (MODULES[m].parent.parent == PACKAGE / "experiments")
    and m not in step_modules()
}
#: The assembler's modules that read files only (all but the pipeline, which trains).
ASSEMBLY = {m for m in MODULES if top(m) == "kernelgap.reproduction"} - {"kernelgap.reproduction.pipeline"}


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


def test_every_module_has_one_layer():
    """A new top-level module or package is declared in :data:`LAYERS` before it is used."""
    declared = [name for layer in LAYERS for name in layer]
    assert len(declared) == len(set(declared))
    assert {top(m) for m in MODULES} == set(declared)


def test_imports_run_down_the_layers():
    """No import, lazy ones in function bodies included, runs from a layer to its own
    (another package of it) or to a higher one."""
    back = sorted(
        f"{name} -> {dep}"
        for name, deps in GRAPH.items()
        for dep in deps
        if dep.startswith("kernelgap") and top(dep) != top(name) and layer_of(dep) >= layer_of(name)
    )
    assert back == []


def test_the_layers_test_sees_a_wrong_way_import():
    """The check above holds a real import graph: a task module importing the models, or the
    report kit importing the registry of experiments, would be caught."""
    assert layer_of("kernelgap.models.attention") > layer_of("kernelgap.task.family")
    assert layer_of("kernelgap.experiments.registry") > layer_of("kernelgap.report.criteria")
    assert layer_of("kernelgap.report.figures") == layer_of("kernelgap.models")  # beside: neither may import the other
    assert "kernelgap.experiments.registry" in GRAPH["kernelgap.reproduction.summary"]
    assert "kernelgap.probe.verdicts" in GRAPH["kernelgap.experiments.probe.section"]
    # what a registry imports by listing its package is in the graph too
    assert "kernelgap.experiments.witness.experiment" in GRAPH["kernelgap.experiments.registry"]
    assert "kernelgap.models.feature_maps.favor_iid" in GRAPH["kernelgap.models.feature_maps"]
    assert "kernelgap.task.families.ladder" in GRAPH["kernelgap.task.families"]


@pytest.mark.parametrize("light", ["kernelgap.task", "kernelgap.report", "kernelgap.probe.verdicts"])
def test_light_layers_stay_light(light):
    """The task, the report kit and the probe's verdict rules reach no torch."""
    for name in (m for m in GRAPH if m == light or m.startswith(light + ".")):
        assert "torch" not in closure(name), name


def test_the_report_reaches_only_the_torch_free_part_of_the_experiments():
    """The report's assembly imports the registry and each experiment's report part (and,
    through them, nothing that trains); the steps and the profiles stay out of reach.  The
    report part may use the probe's verdict rules, not the probe's runner."""
    assert {"kernelgap.experiments.witness.experiment", "kernelgap.experiments.registry"} <= REPORT_PARTS
    assert {"kernelgap.experiments.probe.section", "kernelgap.experiments.probe.page"} <= REPORT_PARTS
    assert "kernelgap.experiments.witness.step" not in REPORT_PARTS
    assert {"kernelgap.reproduction.report", "kernelgap.reproduction.compare"} <= ASSEMBLY
    forbidden = {
        "torch",
        "kernelgap.models",
        "kernelgap.training",
        "kernelgap.sweeps",
        "kernelgap.probe",
        "kernelgap.theory",
    }
    allowed = {"kernelgap.probe.verdicts"}
    for name in (m for m in GRAPH if top(m) == "kernelgap.report" or m in REPORT_PARTS or m in ASSEMBLY):
        reached = closure(name) - allowed
        bad = {r for r in reached if r.startswith("kernelgap.experiments") and r not in REPORT_PARTS}
        bad |= {f for f in forbidden if any(r == f or r.startswith(f + ".") for r in reached)}
        assert not bad, f"{name} reaches {sorted(bad)}"


def test_steps_are_imported_only_by_the_pipeline():
    """Steps are loaded by name when they run; only the pipeline (and steps, from the helpers
    they share) import them."""
    steps = step_modules()
    assert {"kernelgap.experiments.witness.step", "kernelgap.experiments.steps"} <= steps
    for name, deps in GRAPH.items():
        if name != "kernelgap.reproduction.pipeline" and name not in steps:
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
    """Rebuilding a report is file work: importing the report kit, the assembly and the
    probe's verdict rules pulls in no torch (the probe package loads its runner only when asked)."""
    code = (
        "import sys, kernelgap.report.criteria, kernelgap.report.figures, kernelgap.reproduction, "
        "kernelgap.reproduction.render, kernelgap.reproduction.summary, kernelgap.reproduction.schema, "
        "kernelgap.reproduction.compare, kernelgap.reproduction.results_page, kernelgap.experiments.registry, "
        "kernelgap.probe.verdicts; "
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:3]"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


# -- sizes -------------------------------------------------------------------------------

#: Most lines of a function (its decorators and docstring included), parameters of a
#: signature (``self`` and ``cls`` not counted) and lines of a module.
MAX_FUNCTION_LINES, MAX_PARAMETERS, MAX_MODULE_LINES = 60, 8, 500
#: The stated exceptions: a function (``module:Class.function``) or module over a limit, and
#: the words of the reason its docstring's first line (a module's: its first lines) gives.
SIZE_EXCEPTIONS = {
    "kernelgap.cli:sweep": "typer reads the flags from the signature",
    "kernelgap.cli:bound_curve_cmd": "typer reads the flags from the signature",
    "kernelgap.models.scorers:KernelScorer.__init__": "sized by all nine",
}


def functions_of(tree: ast.Module):
    """``(qualified name, node)`` of every function of a module, methods as ``Class.name``."""
    todo = [("", node) for node in tree.body]
    while todo:
        prefix, node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            todo += [(f"{prefix}{node.name}.", n) for n in node.body]
        elif isinstance(node, ast.ClassDef):
            todo += [(f"{prefix}{node.name}.", n) for n in node.body]


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [x.arg for x in (a.vararg, a.kwarg) if x]
    return len(names) - (names[:1] in (["self"], ["cls"]))


def oversized() -> dict[str, str]:
    """Every function and module of the package over a limit, with what it measures."""
    out = {}
    for name, path in sorted(MODULES.items()):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            out[name] = f"{len(text.splitlines())} lines"
        for qual, node in functions_of(ast.parse(text)):
            lines, params = (
                node.end_lineno - min([node.lineno] + [d.lineno for d in node.decorator_list]) + 1,
                (parameter_count(node)),
            )
            if lines > MAX_FUNCTION_LINES or params > MAX_PARAMETERS:
                out[f"{name}:{qual}"] = f"{lines} lines, {params} parameters"
    return out


def stated_reason(entry: str) -> str:
    """The first line of a function's docstring, or the first lines of a module's."""
    module, _, qual = entry.partition(":")
    tree = ast.parse(MODULES[module].read_text())
    if not qual:
        return " ".join((ast.get_docstring(tree) or "").split("\n\n")[0].split())
    node = dict(functions_of(tree))[qual]
    return (ast.get_docstring(node) or "").strip().splitlines()[0] if ast.get_docstring(node) else ""


def test_functions_and_modules_stay_small():
    """No function over 60 lines or 8 parameters, no module over 500 lines, unless listed
    in :data:`SIZE_EXCEPTIONS` with the reason its docstring states; a listed one that no
    longer exceeds a limit leaves the list."""
    found = oversized()
    assert sorted(set(found) - set(SIZE_EXCEPTIONS)) == [], found
    assert sorted(set(SIZE_EXCEPTIONS) - set(found)) == []
    for entry, reason in SIZE_EXCEPTIONS.items():
        assert reason in stated_reason(entry), f"{entry}: its docstring does not say {reason!r}"


def test_the_size_scan_measures_what_it_claims(tmp_path):
    """Methods are named with their class, decorators count as lines and ``self`` as no
    parameter: the scan would see a long method or a wide signature."""
    source = "class A:\n    @staticmethod\n    def f(self, a, b, c, d, e, f, g, h):\n" + "        x = 1\n" * 60
    tree = ast.parse(source)
    (qual, node), *_ = functions_of(tree)
    assert qual == "A.f" and parameter_count(node) == 8
    assert node.end_lineno - node.decorator_list[0].lineno + 1 == 62
