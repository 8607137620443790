"""One digest of every run id the built-in sweeps and the example sweeps make.

A run id hashes only what applies to a run (``training.RunConfig.run_id``); a change to how
configs are modelled must leave every id as it was.  This script loads the sweep file of
every experiment of every built-in profile (``quick``, ``paper``, ``wall``) and every
``examples/*.toml``, and prints, per group, the number of distinct run ids and the SHA-256
of their sorted list, then the same over all of them together:

    python benchmarks/run_id_digest.py [--examples-only]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from kernelgap.experiments.profile import load_profile, profile_names
from kernelgap.sweeps.config import load_sweep

ROOT = Path(__file__).resolve().parents[1]


def sweep_ids(path: Path) -> list[str]:
    """The sorted run ids of one sweep file."""
    return sorted(run.run_id() for run in load_sweep(path).runs())


def profile_sweeps() -> dict[str, Path]:
    """``profile/experiment`` → its sweep file, for every built-in profile."""
    out = {}
    for name in profile_names():
        profile = load_profile(name)
        for exp in profile.experiments:
            path = profile.sweep_file(exp)
            if path is not None:
                out[f"{name}/{exp}"] = path
    return out


def example_sweeps() -> dict[str, Path]:
    return {f"examples/{p.name}": p for p in sorted((ROOT / "examples").glob("*.toml"))}


def digest(sweeps: dict[str, Path]) -> tuple[str, int]:
    """SHA-256 of ``{label: sorted run ids}`` as canonical JSON, and the number of ids."""
    ids = {label: sweep_ids(path) for label, path in sorted(sweeps.items())}
    text = json.dumps(ids, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), sum(len(v) for v in ids.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples-only", action="store_true", help="only examples/*.toml")
    args = parser.parse_args()
    groups = {"examples": example_sweeps()}
    if not args.examples_only:
        groups["profiles"] = profile_sweeps()
    everything = {}
    for group, sweeps in groups.items():
        sha, count = digest(sweeps)
        print(f"{group}: {count} run ids ({len(sweeps)} sweeps) sha256={sha}")
        everything.update(sweeps)
    sha, count = digest(everything)
    print(f"all: {count} run ids ({len(everything)} sweeps) sha256={sha}")


if __name__ == "__main__":
    main()
