"""kernelgap: where nonnegative kernel attention stops matching dense softmax.

Layers (imports flow one way, down): ``cli`` → ``reproduction`` → ``experiments`` →
``probe`` → ``sweeps`` → ``training``, ``theory`` → ``models``, ``report`` (the report
kit: it only reads result files) → ``task`` → ``io``, ``limits``, ``validation`` →
``errors``; nothing imports ``cli`` (``tests/test_structure.py``).  The mathematics is in
``docs/theory.md``, the experiments in ``docs/experiments.md``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernelgap")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
