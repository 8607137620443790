"""kernelgap: where nonnegative kernel attention stops matching dense softmax.

Layers (imports flow one way, down): ``cli`` → ``reproduction`` → ``experiments`` →
``probe`` → ``sweeps`` → ``training``, ``theory`` → ``models``, ``report`` (the report
kit: it only reads result files) → ``task`` → ``io``, ``limits``, ``validation`` →
``errors``; nothing imports ``cli`` (``tests/test_structure.py``).  The mathematics is in
``docs/theory.md``, the experiments in ``docs/experiments.md``.
"""

import importlib
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernelgap")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__", "lazy_names"]


def lazy_names(package: str, where: dict[str, str], namespace: dict):
    """The ``__getattr__`` (PEP 562) of a package whose public names are imported when first
    used: ``where`` maps each name to the module of ``package`` that defines it, and a name
    once imported is kept in ``namespace`` (the package's globals).  A package checked
    without torch (``models``, ``training``, ``sweeps``) loads its torch modules only then."""

    def __getattr__(name: str):
        if name in where:
            value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
