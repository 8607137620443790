"""Signed kernels on OOD pools: a sweep only.  Its runs join the OOD pool, which the
``signed`` item of the summary reads (docs/experiments.md, "Beyond the paper")."""

from __future__ import annotations

from ..base import Experiment

EXPERIMENT = Experiment(name="signed_ood", order=80, title="Signed kernels on OOD pools", pools=("ood",))
