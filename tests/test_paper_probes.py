"""The paper profile's probes: the libraries people use (fla's maps, performer-pytorch,
linear-attention-transformer, x-transformers, torch's softmax, a module in a file) and the
recurrent reference layers, each on three seeds, and each builds as its entry says."""

from __future__ import annotations

import pytest
import torch

from kernelgap.experiments.probe.meter import library_of
from kernelgap.experiments.profile import load_profile
from kernelgap.models.external import build_module
from kernelgap.models.module_spec import ModuleImportError
from kernelgap.probe.module import module_spec

PROBES = load_profile("paper").settings["probe"]["probes"]
REFERENCE = "reference (plain torch)"


def test_enough_modules_libraries_and_layer_kinds_each_on_three_seeds():
    libraries = {e.name: library_of(e.model_dump()) for e in PROBES}
    modules = [n for n, lib in libraries.items() if lib not in ("kernelgap", REFERENCE)]
    assert len(modules) >= 8 and len({libraries[n] for n in modules}) >= 3
    assert {"torch", "file", "x_transformers", "fla-core"} <= set(libraries.values())
    reference = {e.target.split(":")[1] for e in PROBES if libraries[e.name] == REFERENCE}
    assert len(reference) >= 4
    assert all(e.seeds == [0, 1, 2] for e in PROBES if libraries[e.name] != "kernelgap")


@pytest.mark.parametrize("entry", PROBES, ids=[e.name for e in PROBES])
def test_each_entry_builds_and_keeps_the_shape(entry):
    """Its spec passes the checks (the rank binding included), and the module built (wrapped)
    at its first rank maps tokens [B, N, m] to finite predictions [B, N]; rank-free exactly
    for softmax."""
    try:
        cls, spec = module_spec(entry.target, entry.kwargs, entry.interface, entry.d_model, entry.args, entry.output)
    except ModuleImportError:
        pytest.skip(f"{entry.requires} is not installed")
    assert spec.rank_free == (entry.name in ("softmax", "x-transformers"))
    rank = entry.ranks["witness"][0]
    module = build_module(cls, spec, 8, rank, seed=0)
    out = module(torch.randint(0, 2, (2, 5, 8)).float())
    assert out.shape == (2, 5) and bool(out.isfinite().all())
