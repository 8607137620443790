"""What a probe is told: :class:`ProbeConfig`, one model for ``kernelgap probe``'s flags and,
as :class:`ProbeEntry`, for each ``[[probes]]`` entry of a profile (docs/experiments.md,
"Probe").  A config is checked as it is made, torch-free: a bad value is refused in one line
naming its key before the module is touched (:class:`~kernelgap.validation.Config`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, StringConstraints, create_model, model_validator

from ..errors import ConfigError
from ..io import plain_name
from ..limits import MAX_RANK, MAX_SECONDS, MAX_STEPS, MAX_WIDTH, MAX_WORKERS
from ..models.module_spec import Interface
from ..run_values import Device, LearningRate, Seed
from ..sweeps.executors import EXECUTORS
from ..validation import Config, Int, Number, Says, between, invalid, one_of
from .suites import PROFILES, Suite, suites

#: Default seconds per phase of a probed module: importing it, checking it, one training
#: step (docs/experiments.md, "Time limits"; :mod:`~kernelgap.probe.leash`).
TIME_LIMITS = {"import": 60.0, "check": 300.0, "step": 600.0}
Seconds = Annotated[
    Number,
    Field(gt=0, le=MAX_SECONDS),
    Says(f"must be a positive number of seconds (at most {MAX_SECONDS:,}), got {{value}}"),
]
#: Seconds per phase, :data:`TIME_LIMITS` for those not given (made by name: ``import`` is a keyword).
TimeLimits = create_model(
    "TimeLimits",
    __base__=Config,
    **{
        phase: (Seconds, Field(s, description=f"seconds the {phase} phase may take"))
        for phase, s in TIME_LIMITS.items()
    },
)

NonEmpty = Annotated[str, StringConstraints(min_length=1), Says("must be a non-empty string, got {shown}")]
Rank = between(1, MAX_RANK)
#: Ranks for every suite (a list) or per suite name (a table of lists).
Ranks = Annotated[
    list[Rank] | dict[str, list[Rank]],
    Says(f"must be a list of ranks in 1..{MAX_RANK:,} or a table of them by suite name, got {{shown}}"),
]
#: ``true`` (search every suite's recipes), ``false``, or the suites to search.
Recipes = Annotated[bool | list[str], Says("must be true, false or a list of suite names, got {shown}")]


class ProbeConfig(Config):
    """One probe: the module, what trains, where and how (each field says).  The module and
    its kwargs may be given by position, the rest by name."""

    model_config = ConfigDict(frozen=True)

    target: NonEmpty = Field(description="the module: pkg.mod:Class or path/to/file.py:Class")
    kwargs: dict[str, Any] = Field({}, description="the module's constructor keyword arguments")
    interface: Interface | None = Field(None, description="sequence or layer (default: its kernelgap_interface)")
    args: dict[str, Any] = Field({}, description="argument map: constructor argument → m, rank, d_model or a constant")
    output: Int | None = Field(None, description="index of the prediction in a tuple the module returns")
    d_model: between(1, MAX_WIDTH) = Field(32, description="embedding width given to a layer module")
    profile: one_of(PROFILES) = Field("quick", description="quick or paper, the suites of kernelgap.probe.suites")
    ranks: Ranks | None = Field(
        None, description="ranks overriding the suites', all or by suite (SUITE= or [] leaves one out)"
    )
    seeds: list[Seed] | None = Field(None, description="seeds overriding the suites'")
    steps: Annotated[Int, Field(ge=0, le=MAX_STEPS * 3 // 2)] | None = Field(
        None, description="training steps per run overriding the suites' (a third MSE, the rest power-mean)"
    )
    lr: LearningRate | None = Field(None, description="Adam learning rate overriding the suites' (theirs: 3e-3)")
    recipes: Recipes = Field(
        True, description="the recipe search (other schedules where a rank fails unforbidden): on, off or its suites"
    )
    time_limits: TimeLimits = Field(
        TimeLimits(), description="seconds the module's import, check and each step may take (kernelgap.probe.leash)"
    )
    features: between(1, MAX_RANK) | None = Field(
        None, description="the module's true feature count where it declares none (kernelgap_features)"
    )
    kernel: NonEmpty | None = Field(
        None, description="the built-in map of the module's kernel, trained beside it (default: kernelgap.probe.twin)"
    )
    device: Device = Field("cpu", description="the torch device every run trains on (cpu, cuda, cuda:N, mps)")
    out: str | Path | None = Field(None, description="the probe's folder (default: results/probe-<Class>)")
    baseline: str | Path | None = Field(
        None,
        description="the folder of the elu1 and twin runs, shared by the probes that name it (a finished run is "
        "reused by its run id; default: <out>/baseline, or results/probe-baseline without --out)",
    )
    executor: Literal[tuple(EXECUTORS)] = Field("local", description="local (process pool), ray or inline")
    workers: between(1, MAX_WORKERS) | None = Field(None, description="runs trained at once (default: the cores)")
    address: str | None = Field(None, description="the Ray cluster's HOST:PORT (ray executor)")

    def __init__(self, /, *args, **data) -> None:
        if len(args) > 2:
            raise TypeError("ProbeConfig takes the module and its kwargs by position, the rest by name")
        super().__init__(*args, **data)

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @model_validator(mode="after")
    def _ranks_name_suites(self) -> ProbeConfig:
        """A table of ranks names suites of the profile and leaves one of them in."""
        names = [s.name for s in PROFILES[self.profile]]
        if isinstance(self.ranks, dict):
            unknown = sorted(set(self.ranks) - set(names))
            if unknown:
                text = f"names no suite {unknown[0]!r}; the {self.profile} profile has {', '.join(names)}"
                raise invalid(text, path="ranks")
            if all(self.ranks.get(name) == [] for name in names):
                raise invalid(
                    f"leaves out every suite of the {self.profile} profile; give one some ranks", path="ranks"
                )
        return self

    def folder(self, class_name: str) -> Path:
        """The probe's results folder: ``out``, else ``results/probe-<class_name>``."""
        return Path(self.out) if self.out is not None else Path("results") / f"probe-{class_name}"

    def baseline_folder(self, class_name: str) -> Path:
        """The folder of the baseline's and the twin's runs: ``baseline``; else, for a probe in
        its default folder, ``results/probe-baseline`` (beside every such probe, so they share
        it: a run is reused by its run id); else ``<out>/baseline``."""
        if self.baseline is not None:
            return Path(self.baseline)
        return Path("results") / "probe-baseline" if self.out is None else Path(self.out) / "baseline"

    def suites(self, reading: str = "first", rank_free: bool = False) -> list[Suite]:
        """The suites this probe trains (:func:`~kernelgap.probe.suites.suites`), on its device
        (named in their schedule only where it is not the CPU, so CPU runs keep their folders)."""
        out = suites(self.profile, self.ranks, self.seeds, self.steps, self.lr, reading, rank_free)
        for suite in out:
            suite.train.update({"device": self.device} if self.device != "cpu" else {})
        return out

    @property
    def limits(self) -> dict[str, float]:
        """Seconds per phase."""
        return self.time_limits.model_dump()

    @property
    def sweep_options(self) -> dict:
        """The sweep runner's options (:func:`~kernelgap.sweeps.run_sweeps`)."""
        return {"executor": self.executor, "workers": self.workers, "address": self.address}


#: What an ablation (:attr:`ProbeEntry.ablates`) changes in the probe it varies, and so the cause
#: it names where it fits and that probe does not (docs/experiments.md, "Why a library layer fails").
CAUSES = ("initialisation", "normalisation", "projections", "shared feature map", "output path", "learning rate")
#: The fields an ablation may change (any other field it gives must equal the ablated probe's).
CHANGEABLE = ("target", "kwargs", "interface", "args", "output", "d_model", "steps", "lr")


class ProbeEntry(ProbeConfig):
    """One ``[[probes]]`` entry of ``profile.toml``: a probe with a name and the library it
    needs; where it is written and how it runs are the reproduction's.  An *ablation*
    (``ablates``) is another probe of the profile with one thing changed, named by ``cause``
    (:data:`CAUSES`): where it is exact and that probe is not, the report states the cause."""

    name: NonEmpty = Field(description="the probe's folder in the reproduction: probe/<name>/")
    requires: str | None = Field(None, description="the library the module needs (named where it is missing)")
    ablates: NonEmpty | None = Field(None, description="the probe of the profile this one varies in one thing")
    cause: Literal[CAUSES] | None = Field(None, description=f"what it varies ({', '.join(CAUSES)}); with ablates")
    out: ClassVar[None] = None
    baseline: ClassVar[None] = None
    executor: ClassVar[None] = None
    workers: ClassVar[None] = None
    address: ClassVar[None] = None

    @model_validator(mode="after")
    def _cause_with_ablates(self) -> ProbeEntry:
        """``ablates`` and ``cause`` come together."""
        if (self.ablates is None) != (self.cause is None):
            raise invalid("ablates and cause come together: the probe it varies and what it changes", "cause")
        return self

    def change_from(self, other: ProbeEntry) -> str:
        """What this entry changes from ``other`` among :data:`CHANGEABLE`: ``init_scale = 0.5``,
        ``lr = 0.001``, ``without tie`` (a keyword argument per key); empty when nothing."""
        out = []
        for field in CHANGEABLE:
            mine, theirs = getattr(self, field), getattr(other, field)
            if isinstance(mine, dict) and isinstance(theirs, dict):
                changed = [k for k in sorted(set(mine) | set(theirs)) if mine.get(k, ...) != theirs.get(k, ...)]
                out += [_assign(k, mine[k]) if k in mine else f"without {k}" for k in changed]
            elif mine != theirs:
                out.append(_assign(field, mine))
        return ", ".join(out)


def _assign(key: str, value) -> str:
    return f"{key} = {json.dumps(value)}"


#: The probes of a profile without ``[[probes]]``.
DEFAULT_PROBES = ({"name": "decayed", "target": "kernelgap.probe.examples:DecayedLinearAttention"},)


def parse_probes(entries, path: Path) -> list[ProbeEntry]:
    """``[[probes]]`` (none: :data:`DEFAULT_PROBES`): each entry a :class:`ProbeEntry` whose
    name is a plain folder name, no two alike."""
    entries = [dict(e) for e in DEFAULT_PROBES] if entries is None else entries
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: 'probes' must be an array of tables ([[probes]])")
    out = []
    for k, entry in enumerate(entries):
        try:
            out.append(ProbeEntry.parse(entry, f"probes[{k}]"))
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        plain_name(entry["name"], f"{path}: probes[{k}].name", ConfigError)  # the folder probe/<name>/
    if len({e.name for e in out}) != len(out):
        raise ConfigError(f"{path}: two probes share a name")
    _check_ablations(out, path)
    return out


def _check_ablations(entries: list[ProbeEntry], path: Path) -> None:
    """Each ablation names another probe of the profile, itself no ablation, and changes
    something in it (:meth:`ProbeEntry.change_from`)."""
    named = {e.name: e for e in entries}
    for k, entry in enumerate(entries):
        if entry.ablates is None:
            continue
        where = f"{path}: probes[{k}].ablates"
        other = named.get(entry.ablates)
        if other is None or other is entry:
            others = ", ".join(n for n in named if n != entry.name) or "none"
            raise ConfigError(f"{where}: names no other probe of the profile {entry.ablates!r} (probes: {others})")
        if other.ablates is not None:
            raise ConfigError(f"{where}: {entry.ablates!r} is itself an ablation; name the probe it varies")
        if not entry.change_from(other):
            raise ConfigError(f"{where}: changes nothing in {entry.ablates!r} ({', '.join(CHANGEABLE)} are equal)")
