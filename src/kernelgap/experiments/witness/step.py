"""After the witness sweep: the certificate and the one-hot construction (``certificate.json``)."""

from __future__ import annotations

from pathlib import Path

from ...task.family import count_json, sequence_count
from ...theory.certificate import certify
from ..steps import constructed, sweep_runs


def certificate(profile, out: Path, sweep_options: dict) -> dict:
    """The witness family's certificate (exact rationals) and the one-hot construction at the
    certified rank, checked on every sequence."""
    family = sweep_runs(profile, "witness")[0].family.build()
    return {
        **certify(family).to_json(),
        "m": family.m,
        "sequences": count_json(sequence_count(family)),
        "constructed": constructed(family),
    }
