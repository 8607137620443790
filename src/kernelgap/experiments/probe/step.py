"""The probe experiment's step (no sweep of its own): every ``[[probes]]`` module through
the probe, beside the ``elu1`` baseline."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...io import atomic_write_json
from ...models.external import LibraryImportError, ModuleImportError
from ...probe.config import ProbeConfig, ProbeEntry
from ...probe.runner import run_probe
from ...report.integrity import sealed
from ..steps import local_width
from .section import ABLATION, SKIPPED


def probe_modules(profile, out: Path, sweep_options: dict) -> None:
    """Probe every configured module into ``out/<name>/`` beside the ``elu1`` baseline
    (``out/baseline/``, shared between equal suites); a module whose library is not
    installed leaves ``skipped.json``.  On the local pool the probes run side by side, one
    worker each (a probe's runs are one stack each, so one probe alone keeps one core busy);
    a run two probes share is trained by whichever claims it first."""
    entries = list(profile.settings["probe"]["probes"])
    named = {entry.name: entry for entry in entries}
    width = local_width(sweep_options, len(entries))
    options = {**sweep_options, "workers": 1} if width > 1 else sweep_options
    with ThreadPoolExecutor(max_workers=width) as pool:
        for done in [pool.submit(_probe_one, entry, out, options, named.get(entry.ablates)) for entry in entries]:
            done.result()


def _probe_one(entry: ProbeEntry, out: Path, sweep_options: dict, ablated: ProbeEntry | None = None) -> None:
    """One probe into ``out/<name>/``; an ablation (``ablated``: the probe it varies) also
    leaves ``ablation.json``: that probe's name, the cause and the change."""
    folder = out / entry.name
    exclude = {"name", "requires", "ablates", "cause"}
    config = ProbeConfig(**entry.model_dump(exclude=exclude), out=folder, baseline=out / "baseline", **sweep_options)
    try:
        run_probe(config)
        if ablated is not None:
            facts = {"ablates": ablated.name, "cause": entry.cause, "change": entry.change_from(ablated)}
            atomic_write_json(folder / ABLATION, sealed(facts), out)
    except ModuleImportError as exc:
        # a library names its extra; a module file (missing: a profile run outside the
        # repository that holds it) is said as it is
        why = str(exc)
        if isinstance(exc, LibraryImportError):
            why = f"{entry.requires or 'its library'} is not installed (pip install 'kernelgap[zoo]'): {exc}"
        atomic_write_json(folder / SKIPPED, sealed({"name": entry.name, "target": entry.target, "why": why}), out)
