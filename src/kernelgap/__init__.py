"""kernelgap: where nonnegative kernel attention stops matching dense softmax.

Layers (imports flow one way): ``task`` ← ``models`` ← ``theory``;
``models`` ← ``training`` ← ``sweeps`` ← ``experiments`` and ``probe``;
``report`` only reads result files; nothing imports ``cli``.  The mathematics
is in ``docs/theory.md``, the experiments in ``docs/experiments.md``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernelgap")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
