"""Probe a module: check it, read its causality, train it and the baseline through sweeps.

Every run goes through the sweep machinery (:func:`kernelgap.sweeps.run_sweep`),
so a probe is resumable, parallel (local pool or Ray) and never overwrites a
result.  ``OUT`` holds:

* ``probe.json`` — what was probed (target, kwargs, interface, argument map,
  source hash, reading, parameter counts, suites);
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
from dataclasses import asdict, replace
from pathlib import Path

import tomli_w
import torch

from .. import __version__
from ..errors import KernelgapError
from ..experiments.probe.experiment import needs_recipe, probe_rows, rank_verdicts
from ..io import atomic_write_json, atomic_write_text, read_json
from ..limits import MAX_RANK
from ..models.external import (
    ModuleModel,
    ModuleSpec,
    build_module,
    check_arguments,
    declares_features,
    load_target,
    module_failures,
    module_features,
    split_target,
)
from ..models.feature_maps import feature_map_class
from ..sweeps import run_sweeps
from ..sweeps.config import parse_sweep
from ..sweeps.executors import check_executor
from ..task import build_family
from ..theory.certificate import certify
from ..training import TrainConfig, default_model
from ..training.config import record_model
from ..training.curve import final_power
from .floor import query_blind
from .suites import BASELINE, RECIPE_KEYS, RECIPES, Suite, suites
from .twin import TWIN_TARGET, twin_map

META = "probe.json"
#: Keys of ``probe.json`` that make a probe what it is: another value is another probe.
IDENTITY = ("target", "kwargs", "interface", "args", "output", "d_model", "profile", "suites")


def module_spec(
    target: str,
    kwargs: dict | None = None,
    interface: str | None = None,
    d_model: int = 32,
    args: dict | None = None,
    output: int | None = None,
) -> tuple[type, ModuleSpec]:
    """The class and its spec; a file target is made absolute so any worker can import it.
    The arguments are checked before the module is imported."""
    check_arguments(kwargs if kwargs is not None else {}, args if args is not None else {}, "")
    cls = load_target(target)
    module, attr = split_target(target)
    if module.endswith(".py"):
        target = f"{Path(module).resolve()}:{attr}"
    if interface is None:  # unset: the class's own (an empty string is a value, and refused)
        interface = getattr(cls, "kernelgap_interface", "sequence")
    spec = ModuleSpec.parse(
        {
            "target": target,
            "kwargs": dict(kwargs or {}),
            "interface": interface,
            "d_model": d_model,
            "args": dict(args or {}),
            "output": output,
        },
        where="module",
    )
    return cls, spec


def check_module(cls: type, spec: ModuleSpec, m: int, rank: int, family=None) -> ModuleModel:
    """Build the module at a rank the run will use and run it as training does (gradients
    enabled): a batch of 2 checks the interface, then, given ``family``, one forward and
    backward pass over the whole family (the batch a training step uses).  Anything the
    module raises is one line naming it and the phase."""
    model = ModuleModel(build_module(cls, spec, m, rank, seed=0), spec.target)
    if not any(p.requires_grad for p in model.parameters()):
        raise KernelgapError(f"{cls.__name__} has no trainable parameters")
    tokens = torch.randint(0, 2, (2, 3, m)).float()
    where = f"{cls.__name__} at rank {rank} ({spec.interface} interface)"
    with (
        module_failures(spec.target, "checking the interface", f" at rank {rank} on tokens [2, 3, {m}]"),
        torch.enable_grad(),
    ):
        out = model.module(tokens)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, 3):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise KernelgapError(
            f"{where} does not follow the interface: tokens [2, 3, {m}] must give predictions [2, 3], got {got}"
        )
    if family is not None:
        index = torch.as_tensor(family.index)
        shape = (len(family), family.length)
        with (
            module_failures(
                spec.target,
                "checking a training step",
                f" at rank {rank} on the {family.name} family ({shape[0]} sequences)",
            ),
            torch.enable_grad(),
        ):
            pred = model.predict(torch.as_tensor(family.tokens).float(), index)
            if tuple(pred.shape) != (1, *shape):
                raise KernelgapError(
                    f"{where} does not follow the interface: tokens [{shape[0]}, {shape[1]}, "
                    f"{m}] must give predictions [{shape[0]}, {shape[1]}], "
                    f"got {tuple(pred.shape[1:])}"
                )
            if not pred.requires_grad:
                raise KernelgapError(
                    f"{where}: its predictions do not depend on its parameters (no gradient reaches them)"
                )
            pred.sum().backward()
        model.zero_grad(set_to_none=True)
    return model


def reading_of(model: ModuleModel, m: int, trials: int = 64) -> str:
    """``"final"`` when the first position's output ignores the other tokens (a causal
    module: position 1 sees only itself), else ``"first"``.  The module runs as in
    training (gradients enabled); outputs that are not finite tell nothing (a module that
    gives NaN reads ``"first"`` and its runs diverge, a result like any other)."""
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 2, (trials, 3, m), generator=gen).float()
    moved = tokens.clone()
    moved[:, 1:] = torch.randint(0, 2, (trials, 2, m), generator=gen).float()
    with module_failures(model.target, "checking causality", f" on tokens [{trials}, 3, {m}]"), torch.enable_grad():
        before, after = model.module(tokens)[:, 0].detach(), model.module(moved)[:, 0].detach()
    finite = torch.isfinite(before)
    if not finite.any() or not torch.equal(finite, torch.isfinite(after)):
        return "first"
    before, after = before[finite], after[finite]
    scale = before.abs().max().clamp_min(1.0)
    return "final" if torch.allclose(before, after, atol=1e-6 * float(scale), rtol=0) else "first"


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
    derived = (
        "certified_rank",
        "folder",
        "baseline_folder",
        "features",
        "query_blind",
        "twin_ranks",
        "twin_features",
        "twin_folder",
        "recipes",
        "recipe_folder",
    )
    ident = {k: meta.get(k) for k in IDENTITY}
    rows = ident["suites"] if isinstance(ident["suites"], list) else [ident["suites"]]
    ident["suites"] = [{k: v for k, v in s.items() if k not in derived} if isinstance(s, dict) else s for s in rows]
    return ident


def run_probe(
    target: str,
    kwargs: dict | None = None,
    out: str | Path | None = None,
    profile: str = "quick",
    ranks=None,
    seeds: list[int] | None = None,
    steps: int | None = None,
    lr: float | None = None,
    d_model: int = 32,
    interface: str | None = None,
    args: dict | None = None,
    output: int | None = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    report: bool = False,
    baseline: str | Path | None = None,
    recipes: bool | list[str] = True,
    log=print,
) -> dict:
    """Probe ``target`` into ``out`` (module docstring); returns ``probe.json``'s content.
    ``baseline`` is the folder of the ``elu1`` and twin runs (default ``out/baseline``;
    probes of one reproduction share theirs); ``recipes=False`` skips the recipe search, a list of suite names runs it on those suites only.
    Every option is checked before anything is written: the flags first, then the module,
    then the sweep files, generated and validated in memory (:func:`_sweep_configs`)."""
    if d_model < 1:
        raise KernelgapError(f"--d-model must be ≥ 1, got {d_model}")
    check_executor(executor)
    if workers is not None and workers < 1:
        raise KernelgapError(f"--workers must be ≥ 1, got {workers}")
    first = suites(profile, ranks, seeds, steps, lr)
    cls, spec = module_spec(target, kwargs, interface, d_model, args, output)
    out = Path(out) if out is not None else Path("results") / f"probe-{cls.__name__}"
    baseline = Path(baseline) if baseline is not None else out / "baseline"
    for folder in (out, baseline):
        _check_folder(folder)
    checked = {}
    for suite in first:  # every suite's smallest rank and token width, before any training
        family = build_family(suite.family, **suite.params)
        checked[suite.name] = check_module(cls, spec, family.m, min(suite.ranks), family)
    reading = reading_of(checked[first[0].name], build_family(first[0].family, **first[0].params).m)
    chosen = suites(profile, ranks, seeds, steps, lr, reading) if reading != "first" else first
    counts = checked[first[0].name].parameter_counts()
    module_model = {**record_model(default_model(kind="module", module=spec)), "module": spec.model_dump()}
    baseline_model = record_model(default_model(kind="kernel", feature_map=BASELINE))
    twin = twin_map(cls, spec.kwargs)
    twin_model = _twin_model(twin, spec.d_model) if twin else None
    suite_rows = []
    for suite in chosen:
        family = build_family(suite.family, **suite.params)
        certified = certify(family).certified_rank if family.matching else None
        sub = _folder(suite, reading)
        cfg = TrainConfig(**suite.train)
        features = _features(cls, spec, family.m, suite.ranks)
        row = {
            **asdict(suite),
            "certified_rank": certified,
            "folder": sub,
            "baseline_folder": _baseline_folder(suite, sub, baseline_model),
            "features": features,
            "query_blind": query_blind(family, final_power(cfg.max_steps, cfg.power)),
        }
        if twin_model is not None:
            twin_ranks = [f if f is not None else r for r, f in zip(suite.ranks, features)]
            if all(r <= MAX_RANK for r in twin_ranks):
                row["twin_ranks"] = twin_ranks
                row["twin_features"] = [feature_map_class(twin).output_size(r) for r in twin_ranks]
                row["twin_folder"] = _twin_folder(twin, replace(suite, ranks=sorted(set(twin_ranks))), sub, twin_model)
        suite_rows.append(row)
    meta = {
        "target": f"{Path(split_target(spec.target)[0]).name}:{split_target(spec.target)[1]}",
        "class": cls.__name__,
        "kwargs": spec.kwargs,
        "interface": spec.interface,
        "args": spec.args,
        "output": spec.output,
        "d_model": spec.d_model if spec.interface == "layer" else None,
        "profile": profile,
        "suites": suite_rows,
        "source_hash": spec.source_hash,
        "reading": reading,
        "parameters": counts,
        "baseline": BASELINE,
        "version": __version__,
        "runs": f"runs-{spec.source_hash[:12] or 'nosource'}",
        "baseline_dir": os.path.relpath(baseline, out),
        "twin": twin,
        "recipes": f"recipes-{spec.source_hash[:12] or 'nosource'}",
    }
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
    configs = _sweep_configs(out, baseline, meta, chosen, suite_rows, module_model, baseline_model, twin_model)
    if reading == "final":
        log(f"[probe] {cls.__name__} is causal (position 1 sees only itself): using the final-query reading")
    options = {"executor": executor, "workers": workers, "address": address}
    try:
        _train(configs, options, log)
        if recipes:
            searched = [(s, r) for s, r in zip(chosen, suite_rows) if recipes is True or s.name in recipes]
            for _, row in zip(chosen, suite_rows):
                row["recipes"] = []
            _recipe_search(out, meta, searched, module_model, options, log)
        atomic_write_json(out / META, meta)
    except OSError as exc:
        raise KernelgapError(
            f"cannot write to probe folder {out}: {exc.strerror or exc} ({exc.filename or out})"
        ) from None
    if report:
        from ..report import build_probe_report

        build_probe_report(out, log=log)
    return meta


def _check_folder(folder: Path) -> None:
    """A results folder the probe can create or reuse: not a file, nor under one."""
    if folder.is_dir():
        return
    if folder.exists():
        raise KernelgapError(f"probe folder {folder} is a file, not a folder; choose another --out")
    above = next(p for p in folder.absolute().parents if p.exists())
    if not above.is_dir():
        raise KernelgapError(f"cannot write to probe folder {folder}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise KernelgapError(f"cannot write to probe folder {folder}: {above} is not writable")


def _sweep_configs(
    out: Path,
    baseline: Path,
    meta: dict,
    chosen: list[Suite],
    suite_rows: list[dict],
    module_model: dict,
    baseline_model: dict,
    twin_model: dict | None = None,
) -> list[tuple[str, Path, str, Path]]:
    """``(name, sweep file, its text, results folder)`` of each suite's sweeps, the module's,
    the baseline's, then the twin's, each parsed and every run resolved as the sweep runner
    will (:func:`_checked_text`): nothing is written for a probe that a sweep would refuse."""
    configs = []
    for suite, row in zip(chosen, suite_rows):
        sub = row["folder"]
        for folder, name, model in (
            (out / meta["runs"] / sub, f"probe-{sub}", module_model),
            (baseline / row["baseline_folder"], f"{BASELINE}-{sub}", baseline_model),
        ):
            text = _checked_text(name, suite, model)
            configs.append((name, out / "sweeps" / f"{folder.parent.name}-{sub}.toml", text, folder))
        if twin_model is not None and row.get("twin_folder"):
            name = f"twin-{meta['twin']}-{sub}"
            text = _checked_text(name, replace(suite, ranks=sorted(set(row["twin_ranks"]))), twin_model)
            configs.append((name, out / "sweeps" / f"{name}.toml", text, baseline / row["twin_folder"]))
    return configs


def _checked_text(name: str, suite: Suite, model: dict, variants: list[dict] | None = None) -> str:
    """A suite's sweep file, parsed and every run resolved (:func:`~kernelgap.sweeps.config.parse_sweep`)."""
    text = _sweep_text(name, suite, _model_table(model), variants)
    try:
        parse_sweep(tomllib.loads(text)).runs()
    except KernelgapError as exc:
        raise KernelgapError(f"probe suite {suite.name}: {exc}") from None
    return text


def _features(cls: type, spec: ModuleSpec, m: int, ranks: list[int]) -> list[int | None]:
    """The module's true feature count at each rank (built at each, seed 0), or None per
    rank when the class declares none (:func:`~kernelgap.models.external.declares_features`)."""
    if not declares_features(cls):
        return [None] * len(ranks)
    out = []
    for rank in ranks:
        with module_failures(spec.target, "reading its feature count", f" at rank {rank}"):
            out.append(module_features(build_module(cls, spec, m, rank, seed=0), rank))
    return out


def _twin_model(twin: str, d_model: int) -> dict:
    """The model table of the twin: the built-in map ``twin`` as a layer module."""
    spec = ModuleSpec.parse(
        {"target": TWIN_TARGET, "kwargs": {"feature_map": twin}, "interface": "layer", "d_model": d_model},
        where="module",
    )
    return {**record_model(default_model(kind="module", module=spec)), "module": spec.model_dump()}


def _twin_folder(twin: str, suite: Suite, sub: str, twin_model: dict) -> str:
    text = _sweep_text(f"twin-{twin}-{sub}", suite, _model_table(twin_model))
    return f"twin-{twin}-{sub}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _recipe_search(
    out: Path, meta: dict, searched: list[tuple[Suite, dict]], module_model: dict, options: dict, log
) -> None:
    """Each suite's recipe search (:data:`~kernelgap.probe.suites.RECIPES`): at the first seed
    of every rank whose verdict is not ``exact`` and where the certificate does not forbid a
    fit, every recipe, as one sweep (a variant each) in ``recipes-<hash>/<suite>-<hash>/``.
    The suite's row records what was tried (``recipes``: name, schedule, its training
    fields, ranks, seed) and where (``recipe_folder``)."""
    for suite, row in searched:
        sub = row["folder"]
        rows = probe_rows(out / meta["runs"] / sub)
        verdicts = rank_verdicts(
            rows, dict(zip(suite.ranks, row["features"])), row["certified_rank"], row["query_blind"]
        )
        todo = [v["rank_argument"] for v in verdicts if needs_recipe(v, row["certified_rank"])]
        row["recipes"] = []
        if not todo:
            continue
        rsuite = replace(suite, ranks=todo, seeds=suite.seeds[:1])
        trains = [recipe.train(suite.train) for recipe in RECIPES]
        variants = [{"train": {k: t[k] for k in RECIPE_KEYS}} for t in trains]
        name = f"recipes-{sub}"
        text = _checked_text(name, rsuite, module_model, variants)
        folder = out / meta["recipes"] / f"{sub}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
        _train([(name, out / "sweeps" / f"{meta['recipes']}-{sub}.toml", text, folder)], options, log)
        row["recipe_folder"] = os.path.relpath(folder, out)
        row["recipes"] = [
            {"name": r.name, "schedule": r.describe(), "train": t, "ranks": todo, "seed": rsuite.seeds[0]}
            for r, t in zip(RECIPES, trains)
        ]


def _train(configs: list[tuple[str, Path, str, Path]], options: dict, log) -> None:
    """Each suite's sweeps (:func:`_sweep_configs`): write the files, run them on one pool."""
    sweeps = []
    for name, path, text, folder in configs:
        cfg = atomic_write_text(path, text)
        log(f"[probe] {name}: sweep {cfg} → {folder}")
        sweeps.append((cfg, folder))
    results = run_sweeps(sweeps, progress=sys.stderr.isatty(), **options)  # stderr: errors alone
    for (name, *_), res in zip(configs, results):
        log(f"[probe] {name}: {res.total} runs, {res.done_before} reused, {res.ran} trained ({res.wall_time_s:.0f} s)")


def _folder(suite: Suite, reading: str) -> str:
    """A suite's folder: its name, marked when read on the final query (a shared baseline
    holds both readings)."""
    return suite.name if reading == "first" else f"{suite.name}-{reading}"


def _baseline_folder(suite: Suite, sub: str, baseline_model: dict) -> str:
    """The baseline's folder for a suite: its name and a hash of its sweep, so probes with
    the same suite settings share the runs and probes with other ranks or seeds do not collide."""
    text = _sweep_text(f"{BASELINE}-{sub}", suite, _model_table(baseline_model))
    return f"{sub}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _model_table(model: dict) -> dict:
    """A model spec as a sweep-file table (None values left out: TOML has no null)."""

    def clean(d):
        return {k: clean(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}

    return clean(model)
