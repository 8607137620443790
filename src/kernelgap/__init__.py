"""kernelgap: where nonnegative kernel attention stops matching dense softmax.

Layers (imports flow one way): ``task`` ← ``models`` ← ``theory``;
``training`` ← ``sweeps``; ``report`` only reads result files; nothing
imports ``cli``.  See ``SPEC.md`` (shared) for the mathematics.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernelgap")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
