"""Every registered map on one OOD pool: a sweep only.  Its runs join the OOD pool, and the
``zoo`` section reads them at this sweep's pool size (docs/experiments.md, "Beyond the paper")."""

from __future__ import annotations

from ..base import Experiment

EXPERIMENT = Experiment(name="zoo_ood", order=110, title="The zoo on an OOD pool", pools=("ood",))
