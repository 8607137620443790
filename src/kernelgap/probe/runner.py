"""Probe a module: check it, read its causality, train it and the baseline through sweeps.

Every run goes through the sweep machinery (:func:`kernelgap.sweeps.run_sweep`),
so a probe is resumable, parallel (local pool or Ray) and never overwrites a
result.  ``OUT`` holds:

* ``probe.json`` — what was probed (target, kwargs, interface, argument map,
  source hash, reading, parameter counts, suites);
* ``runs-<hash>/<suite>/`` — the module's sweeps, one folder per source hash,
  so an edited module trains anew while earlier results stay;
* ``baseline/<suite>/`` — the built-in ``elu1`` map at the same ranks and seeds (or
  a folder shared by several probes);
* ``sweeps/<name>.toml`` — the generated sweep files.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict
from pathlib import Path

import tomli_w
import torch

from .. import __version__
from ..errors import KernelgapError
from ..io import atomic_write_json, atomic_write_text, read_json
from ..models.external import ModuleModel, ModuleSpec, build_module, load_target, one_line, source_hash, split_target
from ..sweeps import run_sweep
from ..task import build_family
from ..theory.certificate import certify
from ..training import default_model
from .suites import BASELINE, Suite, suites

META = "probe.json"
#: Keys of ``probe.json`` that make a probe what it is: another value is another probe.
IDENTITY = ("target", "kwargs", "interface", "args", "output", "d_model", "profile", "suites")


def module_spec(target: str, kwargs: dict | None = None, interface: str | None = None,
                d_model: int = 32, args: dict | None = None, output: int | None = None) -> tuple[type, ModuleSpec]:
    """The class and its spec; a file target is made absolute so any worker can import it."""
    cls = load_target(target)
    module, attr = split_target(target)
    if module.endswith(".py"):
        target = f"{Path(module).resolve()}:{attr}"
    spec = ModuleSpec(target=target, kwargs=dict(kwargs or {}),
                      interface=interface or getattr(cls, "kernelgap_interface", "sequence"),
                      d_model=d_model, args=dict(args or {}), output=output, source_hash=source_hash(cls))
    try:
        spec.validate("module")
    except KernelgapError as exc:
        raise KernelgapError(str(exc)) from None
    return cls, spec


def check_module(cls: type, spec: ModuleSpec, m: int, rank: int) -> ModuleModel:
    """Build the module at a rank the run will use and push a batch through it."""
    model = ModuleModel(build_module(cls, spec, m, rank, seed=0))
    if not any(p.requires_grad for p in model.parameters()):
        raise KernelgapError(f"{cls.__name__} has no trainable parameters")
    tokens = torch.randint(0, 2, (2, 3, m)).float()
    where = f"{cls.__name__} at rank {rank} ({spec.interface} interface)"
    try:
        out = model.module(tokens)
    except KernelgapError as exc:
        raise KernelgapError(f"{where}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's forward
        raise KernelgapError(f"{where}: forward failed on tokens [2, 3, {m}]: {type(exc).__name__}: "
                             f"{one_line(exc)}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, 3):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise KernelgapError(f"{where} does not follow the interface: tokens [2, 3, {m}] must give "
                             f"predictions [2, 3], got {got}")
    return model


def reading_of(model: ModuleModel, m: int, trials: int = 64) -> str:
    """``"final"`` when the first position's output ignores the other tokens (a causal
    module: position 1 sees only itself), else ``"first"``."""
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 2, (trials, 3, m), generator=gen).float()
    moved = tokens.clone()
    moved[:, 1:] = torch.randint(0, 2, (trials, 2, m), generator=gen).float()
    with torch.no_grad():
        before, after = model.module(tokens)[:, 0], model.module(moved)[:, 0]
    scale = before.abs().max().clamp_min(1.0)
    return "final" if torch.allclose(before, after, atol=1e-6 * float(scale), rtol=0) else "first"


def _sweep_text(name: str, suite: Suite, model: dict) -> str:
    data = {"name": name, "family": {"name": suite.family, "params": suite.params},
            "model": model, "train": suite.train,
            "grid": {"model": {"rank": suite.ranks}, "seed": suite.seeds}}
    if suite.test_params is not None:
        data["test_family"] = {"params": suite.test_params}
    return tomli_w.dumps(data)


def _identity(meta: dict) -> dict:
    """What makes two probes the same: the module and the suites' settings (not what is
    derived from them, such as folders and certificates)."""
    derived = ("certified_rank", "folder", "baseline_folder")
    ident = {k: meta.get(k) for k in IDENTITY}
    ident["suites"] = [{k: v for k, v in s.items() if k not in derived} for s in ident["suites"] or []]
    return ident


def run_probe(target: str, kwargs: dict | None = None, out: str | Path | None = None,
              profile: str = "quick", ranks=None, seeds: list[int] | None = None,
              steps: int | None = None, lr: float | None = None, d_model: int = 32,
              interface: str | None = None, args: dict | None = None, output: int | None = None,
              executor: str = "local", workers: int | None = None, address: str | None = None,
              report: bool = False, baseline: str | Path | None = None, log=print) -> dict:
    """Probe ``target`` into ``out`` (module docstring); returns ``probe.json``'s content.
    ``baseline`` is the folder of the ``elu1`` runs (default ``out/baseline``; probes of
    one reproduction share theirs)."""
    if d_model < 1:
        raise KernelgapError(f"--d-model must be ≥ 1, got {d_model}")
    cls, spec = module_spec(target, kwargs, interface, d_model, args, output)
    out = Path(out) if out is not None else Path("results") / f"probe-{cls.__name__}"
    baseline = Path(baseline) if baseline is not None else out / "baseline"
    first = suites(profile, ranks, seeds, steps, lr)
    checked = {}
    for suite in first:  # every suite's smallest rank and token width, before any training
        m = build_family(suite.family, **suite.params).m
        checked[suite.name] = check_module(cls, spec, m, min(suite.ranks))
    reading = reading_of(checked[first[0].name], build_family(first[0].family, **first[0].params).m)
    chosen = suites(profile, ranks, seeds, steps, lr, reading) if reading != "first" else first
    counts = checked[first[0].name].parameter_counts()
    module_model = {**asdict(default_model(kind="module", module=spec)), "module": asdict(spec)}
    baseline_model = asdict(default_model(kind="kernel", feature_map=BASELINE))
    suite_rows = []
    for suite in chosen:
        family = build_family(suite.family, **suite.params)
        certified = certify(family).certified_rank if family.matching else None
        sub = _folder(suite, reading)
        suite_rows.append({**asdict(suite), "certified_rank": certified, "folder": sub,
                           "baseline_folder": _baseline_folder(suite, sub, baseline_model)})
    meta = {"target": f"{Path(split_target(spec.target)[0]).name}:{split_target(spec.target)[1]}",
            "class": cls.__name__, "kwargs": spec.kwargs, "interface": spec.interface,
            "args": spec.args, "output": spec.output, "d_model": spec.d_model if spec.interface == "layer" else None,
            "profile": profile, "suites": suite_rows, "source_hash": spec.source_hash,
            "reading": reading, "parameters": counts, "baseline": BASELINE, "version": __version__,
            "runs": f"runs-{spec.source_hash[:12] or 'nosource'}",
            "baseline_dir": os.path.relpath(baseline, out)}
    stored = read_json(out / META)
    if (out / META).exists() and not isinstance(stored, dict):
        raise KernelgapError(f"{out / META} is corrupted (not valid JSON); move it aside or choose another --out")
    if stored is not None and _identity(stored) != _identity(meta):
        raise KernelgapError(f"{out / META} holds a probe of another module or other settings; choose another --out")
    if reading == "final":
        log(f"[probe] {cls.__name__} is causal (position 1 sees only itself): using the final-query reading")
    options = {"executor": executor, "workers": workers, "address": address}
    for suite, row in zip(chosen, suite_rows):
        sub = row["folder"]
        for folder, name, model in ((out / meta["runs"] / sub, f"probe-{sub}", module_model),
                                    (baseline / row["baseline_folder"], f"{BASELINE}-{sub}", baseline_model)):
            cfg = atomic_write_text(out / "sweeps" / f"{folder.parent.name}-{sub}.toml",
                                    _sweep_text(name, suite, _model_table(model)))
            log(f"[probe] {name}: sweep {cfg} → {folder}")
            res = run_sweep(cfg, folder, **options)
            log(f"[probe] {name}: {res.total} runs, {res.done_before} reused, {res.ran} trained "
                f"({res.wall_time_s:.0f} s)")
    atomic_write_json(out / META, meta)
    if report:
        from ..report import build_probe_report

        build_probe_report(out, log=log)
    return meta


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
