"""Probe any attention module with the Min-IP suites (issue #6, item 4).

``kernelgap probe my_pkg.my_mod:MyAttention [--kwargs JSON]`` (or
``path/to/file.py:MyAttention``) imports a ``torch.nn.Module`` subclass that
follows one of two small interfaces, chosen by the class attribute
``kernelgap_interface``:

``"sequence"`` (the default) — a whole model::

    class MyModel(torch.nn.Module):
        def __init__(self, m: int, rank: int, **kwargs): ...
        def forward(self, tokens):      # float tokens [B, N, m] in {0, 1}
            return predictions          # [B, N]: one prediction per position

``"layer"`` — an attention layer that kernelgap wraps with its embedding and
readout (``h = E x``; ``p_i = <a(x_i), layer(h)_i> + b(x_i)`` with two-layer
MLPs ``a``, ``b`` of the raw token, the query-dependent readout of SPEC §2)::

    class MyAttention(torch.nn.Module):
        kernelgap_interface = "layer"
        def __init__(self, d_model: int, rank: int, **kwargs): ...
        def forward(self, x):           # [B, N, d_model]
            return y                    # [B, N, d_model]

``rank`` is the state size the probe sweeps (the feature rank of a kernel
attention, a state width for anything else); ``kwargs`` come from ``--kwargs``
as a JSON object.  Parameters are created in the constructor; the probe seeds
``torch`` before each construction.  Attention must be bidirectional (the
witness family scores position 1) or at least let position 1 see every key.

The probe checks the interface on a dummy batch (``[2, 3, m]``) before any
training; a module that does not follow it is a one-line error (CLI: exit 2).
It then trains one model per (suite, rank, seed) with the standard trainer
(:class:`kernelgap.training.trainer.StackTrainer`: full-batch Adam, MSE then
the p8-norm loss, cosine decay in each phase) on

* the ``witness`` family (m = 24, 736 sequences, certified r ≥ 11): train max
  error, exact when < 1/2 (early stop as soon as exact);
* one or more ``ood`` sizes (train/test token pools disjoint): test
  exact-sequence accuracy (no early stop),

and writes ``probe.json`` (the run records), plus, when run on its own,
``summary.json`` (``{"probe": …}``), figures and ``report.html``.
"""

from .interface import ProbeAdapter, load_target, parse_kwargs
from .runner import PROFILES, ProbeSuite, run_probe

__all__ = ["PROFILES", "ProbeAdapter", "ProbeSuite", "load_target", "parse_kwargs", "run_probe"]
