"""What an experiment folder registers: :class:`Experiment`, with its :class:`Figure` list.

An experiment is one folder ``<name>/``: its sweep file for each profile
(``quick.toml``, ``paper.toml``, or one ``sweep.toml`` for every profile), its
``experiment.py`` defining ``EXPERIMENT = Experiment(...)`` and, when it does work
after its sweep, the module of that step (``step.py``; it may use torch).
``experiment.py`` (with any modules beside it that it imports) is the torch-free part:
the report's assembly (:mod:`kernelgap.reproduction`) imports it, so it imports only the
report kit (:mod:`kernelgap.report.criteria`, ``.html``, ``.figures``, …),
other torch-free rules (:mod:`kernelgap.probe.verdicts`) and never the step, which the
pipeline loads by name (:meth:`Experiment.load_step`).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import plain_name
from ..report.html import titled

#: Where a block of an experiment's HTML goes in ``report.html``, in page order:
#: ``lead`` (after the paper-beside-ours table), ``figures`` (the paper's figures),
#: ``details`` (tables), ``beyond`` (under "Beyond the paper"), ``probes``.
REGIONS = ("lead", "figures", "details", "beyond", "probes")

#: The step of an experiment that certifies each family its sweep trains (``Experiment(…,
#: **FAMILY_CERTIFICATES)``: :func:`kernelgap.experiments.steps.family_certificates`).
FAMILY_CERTIFICATES = {"step": "..steps:family_certificates", "step_reads_sweep": True, "writes": "certificates.json"}


@dataclass(frozen=True)
class Figure:
    """One figure: ``draw(summary, folder) → file names`` (PNG first; ``[]`` when there is
    nothing to draw) and its caption (text, or ``caption(summary) → text``)."""

    name: str
    draw: Callable[[dict, Path], list[str]]
    caption: str | Callable[[dict], str] = ""

    def caption_for(self, summary: dict) -> str:
        return self.caption(summary) if callable(self.caption) else self.caption


@dataclass(frozen=True)
class Experiment:
    """One experiment of a profile, everything outside its sweep file.

    ``section(results) → value`` reads the result files (a
    :class:`kernelgap.report.criteria.Results`) into the value of ``summary.json``'s key
    ``key`` (default: the name), ``None`` when there is nothing to report; experiments
    that share a key each give a dict and their dicts are merged in registry order.
    ``schema`` is that value's type: a :class:`~kernelgap.validation.Section` model (``… |
    None`` where it may be null; rows of :mod:`kernelgap.report.trained` may be used), which
    ``section`` builds the value as (``Model(…).dump()``), or any type pydantic validates;
    the summary's JSON schema is generated from it and a summary read back is checked
    against it (:mod:`kernelgap.reproduction.schema`).  ``sentence(summary)`` and ``figures`` are
    computed from the summary alone; ``html(summary, page) → {region: [html, …]}``
    places its blocks (without it, ``region`` gets the title, the sentence and the
    figures).  ``paper`` goes verbatim into ``summary["paper"]`` and
    ``paper_rows(summary)`` into the table "The paper beside ours"; ``tables(summary) →
    [(title, rows, columns), …]`` are the tables ``docs/results.md`` prints after the sentences
    (the report places its own through ``html``).
    ``headline(summary) → [Finding, …]`` are its main findings for the first screen of the
    report and of ``docs/results.md``: each one short sentence with its number, firm or at the
    edge (:class:`kernelgap.report.html.Finding`).
    ``conclusions(summary) → {name: value}`` lists what a reader concludes from the
    section, each value discrete text (a verdict, a count, a transition rank; never a max
    error or a time that decides nothing): ``kernelgap compare`` reports those that differ
    between two reproductions (:mod:`kernelgap.reproduction.compare`, with each paper row's
    ``ours``, or its ``conclusion`` where the row gives one: ``None`` leaves it out).

    ``settings`` are the defaults of the ``[name]`` table of ``profile.toml`` (typed by
    ``setting_types``, any value where it names none);
    ``profile_keys`` maps other top-level keys of ``profile.toml`` it owns to
    ``parse(value or None, path) → value`` (stored in ``settings[key]``), or to its
    ``"module:function"``, imported as the profile loads (:meth:`profile_parser`).  ``pools``
    name the pools its runs join (:data:`kernelgap.report.criteria.POOLS`: ``witness``,
    ``ood``).  ``step`` is ``"module:function"`` (``".step:run"``: relative to the
    experiment's package), called as ``step(profile, out, sweep_options)`` after the
    sweep; with ``writes`` it returns a payload written to ``out/<writes>`` and is
    skipped once that file exists.
    """

    name: str
    title: str
    key: str | None = None
    section: Callable[[Any], Any] | None = None
    schema: Any = None
    sentence: Callable[[dict], str | None] | None = None
    figures: tuple[Figure, ...] = ()
    html: Callable[[dict, Any], dict[str, list[str]]] | None = None
    region: str = "beyond"
    paper: Mapping[str, Any] = field(default_factory=dict)
    paper_rows: Callable[[dict], list[dict]] | None = None
    tables: Callable[[dict], list[tuple[str, list[dict], list[str]]]] | None = None
    conclusions: Callable[[dict], dict[str, str]] | None = None
    headline: Callable[[dict], list[Any]] | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    profile_keys: Mapping[str, Callable[[Any, Path], Any] | str] = field(default_factory=dict)
    pools: tuple[str, ...] = ()
    step: str | None = None
    #: Whether the step reads the runs of the experiment's sweep (a profile without its sweep
    #: file is refused as it loads, not after the other experiments trained).
    step_reads_sweep: bool = False
    writes: str | None = None
    setting_types: Mapping[str, Any] = field(default_factory=dict)
    #: A built-in experiment's place among the built-ins: ascending (ties by name), the order
    #: of ``summary.json``'s sections, of merging a shared key and of reading the pools.  The
    #: built-ins count in tens (``witness`` 10 … ``probe`` 130), so a new one fits between
    #: two; one that sets none comes after all that do.  A profile folder's experiments
    #: follow the built-ins in the order its ``profile.toml`` lists them, whatever theirs.
    order: float = math.inf
    #: Filled in by the registry: the package ``experiment.py`` lives in, and its folder.
    package: str = ""
    folder: Path | None = None

    def __post_init__(self):
        if self.region not in REGIONS:
            raise ConfigError(f"experiment {self.name!r}: region must be one of {', '.join(REGIONS)}")
        if isinstance(self.schema, dict):
            raise ConfigError(
                f"experiment {self.name!r}: schema must be the type of its section (a pydantic model), not a JSON-schema dict"
            )
        if self.writes and not self.step:
            raise ConfigError(f"experiment {self.name!r}: 'writes' needs a step")
        if self.writes:  # a file of the results folder, never a path out of it
            plain_name(self.writes, f"experiment {self.name!r}: 'writes'", ConfigError)

    @property
    def summary_key(self) -> str:
        return self.key or self.name

    def block(self, summary: dict, *parts: str) -> dict[str, list[str]]:
        """Its HTML in its region: its title, its sentence (where it gives one), then ``parts``."""
        return {self.region: titled(self.title, self.sentence(summary) if self.sentence else None, *parts)}

    def load_step(self) -> Callable[[Any, Path, dict], Any] | None:
        """The after-sweep step, imported now (it may import torch)."""
        return self._named(self.step) if self.step else None

    def profile_parser(self, key: str) -> Callable[[Any, Path], Any]:
        """The parser of a key of ``profile.toml`` it owns, imported now where it is named."""
        parse = self.profile_keys[key]
        return self._named(parse) if isinstance(parse, str) else parse

    def _named(self, name: str):
        module, _, function = name.partition(":")
        return getattr(importlib.import_module(module, self.package or None), function)

    def sweep_file(self, profile: str) -> Path | None:
        """The folder's sweep file for a profile: ``<profile>.toml``, else ``sweep.toml``."""
        if self.folder is None:
            return None
        for name in (f"{profile}.toml", "sweep.toml"):
            if (self.folder / name).is_file():
                return self.folder / name
        return None
