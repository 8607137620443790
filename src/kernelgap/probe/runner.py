"""Probe a module: plan its sweeps, train it and the baseline through them, search recipes.

The module is checked first (:mod:`.module`); every run goes through the sweep
machinery (:func:`kernelgap.sweeps.run_sweep`), so a probe is resumable, parallel (local
pool or Ray) and never overwrites a result.  ``OUT`` holds:

* ``probe.json`` — what was probed (target, kwargs, interface, argument map,
  source hash, reading, parameter counts, suites, each with the module's structure:
  :mod:`kernelgap.probe.structure`);
* ``runs-<hash>/<suite>/`` — the module's sweeps, one folder per source hash,
  so an edited module trains anew while earlier results stay;
* ``baseline/<suite>-<hash>/`` — the built-in ``elu1`` map at the same ranks and seeds (or
  a folder shared by several probes), and ``baseline/twin-<map>-<suite>-<hash>/`` the
  built-in map of the module's own kernel in the same wrapper, where one exists
  (:mod:`kernelgap.probe.twin`), at the module's true feature counts;
* ``recipes-<hash>/<suite>-<hash>/`` — the recipe search: other schedules at the ranks
  where the module failed and the certificate does not forbid a fit
  (:data:`~kernelgap.probe.suites.RECIPES`), one sweep per suite;
* ``sweeps/<name>.toml`` — the generated sweep files.

``probe.json`` also carries, per suite, the module's true feature count at each rank
(:func:`~kernelgap.models.external.module_features`; None where it cannot be told) and
the family's query-blind floor (:func:`kernelgap.probe.floor.query_blind`).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tomllib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import tomli_w

from .. import __version__
from ..errors import KernelgapError
from ..folders import refuse_links, refuse_other_result
from ..io import atomic_write_json, atomic_write_text, read_json
from ..limits import MAX_RANK
from ..models.external import ModuleSpec, split_target
from ..models.feature_maps import feature_map_class
from ..report.integrity import sealed
from ..sweeps import run_sweeps
from ..sweeps.config import parse_sweep
from ..sweeps.executors import step_limit
from ..task import build_family
from ..theory.certificate import certify
from ..training import TrainConfig, default_model
from ..training.config import sweep_table_model
from ..training.stack import final_power
from . import floor
from .config import ProbeConfig
from .leash import rehearse
from .suites import BASELINE, RECIPES, Suite
from .twin import TWIN_TARGET
from .verdicts import CERTIFIED_KINDS, RECIPE_KEYS, kind_floor, needs_recipe, probe_rows, rank_verdicts

META = "probe.json"
#: Keys of ``probe.json`` that make a probe what it is: another value is another probe.
IDENTITY = ("target", "kwargs", "interface", "args", "output", "d_model", "profile", "suites")


def _sweep_text(name: str, suite: Suite, model: dict, variants: list[dict] | None = None) -> str:
    data = {
        "name": name,
        "family": {"name": suite.family, "params": suite.params},
        "model": model,
        "train": suite.train,
        "grid": {"model": {"rank": suite.ranks}, "seed": suite.seeds},
    }
    if suite.test_params is not None:
        data["test_family"] = {"params": suite.test_params}
    if variants:
        data["variants"] = variants
    return tomli_w.dumps(data)


def _identity(meta: dict) -> dict:
    """What makes two probes the same: the module and the suites' settings (not what is
    derived from them, such as folders and certificates)."""
    derived = {"certified_rank", "features", "query_blind", "twin_ranks", "twin_features", "recipes", "structure"}
    derived |= {"folder", "baseline_folder", "twin_folder", "recipe_folder"}
    ident = {k: meta.get(k) for k in IDENTITY}
    rows = ident["suites"] if isinstance(ident["suites"], list) else [ident["suites"]]
    ident["suites"] = [{k: v for k, v in s.items() if k not in derived} if isinstance(s, dict) else s for s in rows]
    return ident


def run_probe(config: ProbeConfig, log=print) -> dict:
    """Probe ``config.target`` into its folder (module docstring) and return ``probe.json``'s
    content.  Every option is checked before anything is written: the config as it was made,
    then the module, then the sweep files, in memory.  The folder's report is the caller's
    (:func:`kernelgap.reproduction.build_probe_report`: the report sits above the probe)."""
    plan = _plan(config)
    meta = _meta(plan, [_suite_row(plan, suite) for suite in plan.suites])
    _check_stored(plan.out, meta)
    configs = _sweep_configs(plan, meta)
    if plan.reading == "final":
        log(f"[probe] {plan.name} is causal (position 1 sees only itself): using the final-query reading")
    for row in meta["suites"]:
        st = row["structure"]
        inter = "not finite" if st["interaction"] is None else f"{st['interaction']:.2g}"
        log(f"[probe] {row['name']}: {plan.name} is {st['kind']} (interaction {inter}{floor_text(st)})")
    try:
        _train(configs, config.sweep_options, log, config.limits["step"])
        if config.recipes:
            for row in meta["suites"]:
                row["recipes"] = []
            searched = [
                (s, row)
                for s, row in zip(plan.suites, meta["suites"])
                if config.recipes is True or s.name in config.recipes
            ]
            _recipe_search(plan, meta, searched, log)
        atomic_write_json(plan.out / META, sealed(meta), plan.out)  # with its checksum, as a run record
    except OSError as exc:
        raise KernelgapError(
            f"cannot write to probe folder {plan.out}: {exc.strerror or exc} ({exc.filename or plan.out})"
        ) from None
    return meta


@dataclass(frozen=True)
class _Plan:
    """A probe checked and planned, nothing written yet: the module, its folders, how it is
    read, the suites it trains and the model tables of its sweeps."""

    config: ProbeConfig
    name: str
    spec: ModuleSpec
    out: Path
    baseline: Path
    reading: str
    suites: list[Suite]
    counts: dict
    features: dict[str, list[int | None]]
    structures: dict[str, dict]
    module_model: dict
    baseline_model: dict
    twin: str | None
    twin_model: dict | None


def _plan(config: ProbeConfig) -> _Plan:
    """Check ``--out`` where it is given, then the module (in a child process, never here:
    :func:`~kernelgap.probe.leash.rehearse`) and the folders."""
    if config.out is not None:
        _check_folder(Path(config.out))
    found = rehearse(config, config.limits)  # the module's phases within their limits, in a child
    spec = ModuleSpec.parse(found["spec"], where="module")  # vouched for: not imported here
    out, baseline = config.folder(found["class"]), config.baseline_folder(found["class"])
    for folder in (out, baseline):
        _check_folder(folder)
    out, baseline = out.absolute(), baseline.absolute()  # wherever a module's code moves this process
    reading, twin = found["reading"], found["twin"]
    return _Plan(
        config=config,
        name=found["class"],
        spec=spec,
        out=out,
        baseline=baseline,
        reading=reading,
        suites=config.suites(reading, spec.rank_free),
        counts=found["parameters"],
        features=found["features"],
        structures=found["structure"],
        module_model=_module_model(spec),
        baseline_model=_model_table(sweep_table_model(default_model(kind="kernel", feature_map=BASELINE))),
        twin=twin,
        twin_model=_module_model(_twin_spec(twin, spec.d_model)) if twin else None,
    )


def _suite_row(plan: _Plan, suite: Suite) -> dict:
    """A suite's entry of ``probe.json``; the twin's ranks, feature counts and folder where the
    module has a twin within the rank limit."""
    family = build_family(suite.family, **suite.params)
    certified = certify(family).certified_rank if family.matching else None
    sub = _folder(suite, plan.reading)
    cfg = TrainConfig(**suite.train)
    features = plan.features[suite.name]
    row = {
        **asdict(suite),
        "certified_rank": certified,
        "folder": sub,
        "baseline_folder": _hashed(sub, f"{BASELINE}-{sub}", suite, plan.baseline_model),
        "features": features,
        "query_blind": floor.query_blind(family, final_power(cfg.max_steps, cfg.power)),
        "structure": _structure_row(plan.structures[suite.name], family),
    }
    if plan.twin_model is not None:
        twin_ranks = [f if f is not None else r for r, f in zip(suite.ranks, features)]
        if all(r <= MAX_RANK for r in twin_ranks):
            row["twin_ranks"] = twin_ranks
            row["twin_features"] = [feature_map_class(plan.twin).output_size(r) for r in twin_ranks]
            twin_suite = replace(suite, ranks=sorted(set(twin_ranks)))
            name = f"twin-{plan.twin}-{sub}"
            row["twin_folder"] = _hashed(name, name, twin_suite, plan.twin_model)
    return row


def _structure_row(found: dict, family) -> dict:
    """The structure check's numbers (:func:`~kernelgap.probe.structure.structure`) and, for a
    kind of :data:`~kernelgap.probe.verdicts.CERTIFIED_KINDS`, the family's floor for it
    (``additive_floor``, ``gated_floor``); ``additive_floor`` is None for every other kind."""
    row = {**found, "additive_floor": None}
    if found["kind"] in CERTIFIED_KINDS:
        key = CERTIFIED_KINDS[found["kind"]][0]
        value = getattr(floor, key)(family)  # the field is named by its function
        row[key] = None if value is None else str(value)
    return row


def floor_text(st: dict) -> str:
    """``, additive floor 3/2`` (or ``gated floor``): the floor a structure row carries, if any."""
    key, value = kind_floor(st)
    return f", {key.replace('_', ' ')} {value}" if value else ""


def _meta(plan: _Plan, suite_rows: list[dict]) -> dict:
    """``probe.json``'s content (docs/formats.md), before the recipe search adds its rows."""
    spec, config = plan.spec, plan.config
    module, attr = split_target(spec.target)
    return {
        "target": f"{Path(module).name}:{attr}",
        "class": plan.name,
        "kwargs": spec.kwargs,
        "interface": spec.interface,
        "args": spec.args,
        "output": spec.output,
        "d_model": spec.d_model if spec.interface == "layer" else None,
        "profile": config.profile,
        "suites": suite_rows,
        "source_hash": spec.source_hash,
        "reading": plan.reading,
        "parameters": plan.counts,
        "baseline": BASELINE,
        "version": __version__,
        "runs": f"runs-{spec.source_hash[:12] or 'nosource'}",
        "baseline_dir": os.path.relpath(plan.baseline, plan.out),
        "twin": plan.twin,
        "recipes": f"recipes-{spec.source_hash[:12] or 'nosource'}",
    }


def _check_stored(out: Path, meta: dict) -> None:
    stored = read_json(out / META)
    if (out / META).exists() and stored is None:
        raise KernelgapError(f"{out / META} is corrupted (not valid JSON); move it aside or choose another --out")
    if stored is not None and not isinstance(stored, dict):
        raise KernelgapError(
            f"{out / META} is not a probe record (a JSON {type(stored).__name__}); move it aside "
            "or choose another --out"
        )
    if stored is not None and _identity(stored) != _identity(meta):
        raise KernelgapError(f"{out / META} holds a probe of another module or other settings; choose another --out")


def _check_folder(folder: Path) -> None:
    """A results folder the probe can create or reuse: not a file, nor under one; not a
    folder of another kind of result, nor inside a sweep's; no symbolic link in it."""
    refuse_other_result(folder, "probe", inside=("sweep",))
    if folder.is_dir():
        refuse_links(folder)
        return
    if folder.exists():
        raise KernelgapError(f"probe folder {folder} is a file, not a folder; choose another --out")
    above = next(p for p in folder.absolute().parents if p.exists())
    if not above.is_dir():
        raise KernelgapError(f"cannot write to probe folder {folder}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise KernelgapError(f"cannot write to probe folder {folder}: {above} is not writable")


def _sweep_configs(plan: _Plan, meta: dict) -> list[tuple[str, Path, str, Path]]:
    """``(name, sweep file, its text, results folder)`` of each suite's sweeps, the module's,
    the baseline's, then the twin's, each checked: nothing is written for a probe that a sweep
    would refuse."""
    out, baseline = plan.out, plan.baseline
    configs = []
    for suite, row in zip(plan.suites, meta["suites"]):
        sub = row["folder"]
        for folder, name, model in (
            (out / meta["runs"] / sub, f"probe-{sub}", plan.module_model),
            (baseline / row["baseline_folder"], f"{BASELINE}-{sub}", plan.baseline_model),
        ):
            text = _checked_text(name, suite, model)
            configs.append((name, out / "sweeps" / f"{folder.parent.name}-{sub}.toml", text, folder))
        if plan.twin_model is not None and row.get("twin_folder"):
            name = f"twin-{meta['twin']}-{sub}"
            text = _checked_text(name, replace(suite, ranks=sorted(set(row["twin_ranks"]))), plan.twin_model)
            configs.append((name, out / "sweeps" / f"{name}.toml", text, baseline / row["twin_folder"]))
    return configs


def _checked_text(name: str, suite: Suite, model: dict, variants: list[dict] | None = None) -> str:
    """A suite's sweep file, parsed and every run resolved (:func:`~kernelgap.sweeps.config.parse_sweep`)."""
    text = _sweep_text(name, suite, model, variants)
    try:
        parse_sweep(tomllib.loads(text)).runs()
    except KernelgapError as exc:
        raise KernelgapError(f"probe suite {suite.name}: {exc}") from None
    return text


def _twin_spec(twin: str, d_model: int) -> ModuleSpec:
    """The twin: the built-in map ``twin`` as a layer module."""
    return ModuleSpec.parse(
        {"target": TWIN_TARGET, "kwargs": {"feature_map": twin}, "interface": "layer", "d_model": d_model},
        where="module",
    )


def _module_model(spec: ModuleSpec) -> dict:
    """The sweep-file model table of a module."""
    return _model_table({**sweep_table_model(default_model(kind="module", module=spec)), "module": spec.model_dump()})


def _hashed(prefix: str, name: str, suite: Suite, model: dict) -> str:
    """A shared folder for a suite's sweep ``name``: ``prefix`` and a hash of the sweep, so
    probes with the same suite settings share the runs and probes with other ranks or seeds do
    not collide."""
    return f"{prefix}-{hashlib.sha256(_sweep_text(name, suite, model).encode()).hexdigest()[:8]}"


def _recipe_search(plan: _Plan, meta: dict, searched: list[tuple[Suite, dict]], log) -> None:
    """Each suite's recipe search (:data:`~kernelgap.probe.suites.RECIPES`): every recipe at the
    first seed of every rank :func:`~kernelgap.probe.verdicts.needs_recipe` names, as one sweep
    (a variant each); the suite's row records what was tried and where."""
    out = plan.out
    for suite, row in searched:
        sub = row["folder"]
        rows = probe_rows(out / meta["runs"] / sub)
        verdicts = rank_verdicts(
            rows,
            dict(zip(suite.ranks, row["features"])),
            row["certified_rank"],
            row["query_blind"],
            None,
            row["structure"],
        )
        todo = [v["rank_argument"] for v in verdicts if needs_recipe(v, row["certified_rank"], row["structure"])]
        if not todo:
            continue
        rsuite = replace(suite, ranks=todo, seeds=suite.seeds[:1])
        trains = [recipe.train(suite.train) for recipe in RECIPES]
        variants = [{"train": {k: t[k] for k in RECIPE_KEYS}} for t in trains]
        name = f"recipes-{sub}"
        text = _checked_text(name, rsuite, plan.module_model, variants)
        folder = out / meta["recipes"] / f"{sub}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
        sweep = (name, out / "sweeps" / f"{meta['recipes']}-{sub}.toml", text, folder)
        _train([sweep], plan.config.sweep_options, log, plan.config.limits["step"])
        row["recipe_folder"] = os.path.relpath(folder, out)
        row["recipes"] = [
            {"name": r.name, "schedule": r.describe(), "train": t, "ranks": todo, "seed": rsuite.seeds[0]}
            for r, t in zip(RECIPES, trains)
        ]


def _train(configs: list[tuple[str, Path, str, Path]], options: dict, log, step: float) -> None:
    """Write the sweep files and run them on one pool whose workers hold each call into the
    module to ``step`` seconds."""
    sweeps = []
    for name, path, text, folder in configs:
        cfg = atomic_write_text(path, text, path.parent.parent)  # within the probe folder: OUT/sweeps/
        log(f"[probe] {name}: sweep {cfg} → {folder}")
        sweeps.append((cfg, folder))
    with step_limit(step):
        # a bar on a terminal, else a line per finished task in the log (a log file sees progress too)
        shown = True if sys.stderr.isatty() else (lambda line: log(f"[probe] {line}"))
        results = run_sweeps(sweeps, progress=shown, **options)
    for (name, *_), res in zip(configs, results):
        log(f"[probe] {name}: {res.total} runs, {res.done_before} reused, {res.ran} trained ({res.wall_time_s:.0f} s)")


def _folder(suite: Suite, reading: str) -> str:
    """A suite's folder: its name, marked when read on the final query (a shared baseline
    holds both readings)."""
    return suite.name if reading == "first" else f"{suite.name}-{reading}"


def _model_table(model: dict) -> dict:
    """A model spec as a sweep-file table (None values left out: TOML has no null)."""

    def clean(d):
        return {k: clean(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}

    return clean(model)
