"""Print the ``ATEN_CPU_CAPABILITY`` values this CPU runs other than its native one.

PyTorch picks SIMD kernels (``default``, ``avx2``, ``avx512``) at import; the variable lowers
the choice, never raises it past what the CPU has.  ``make test-capabilities`` reruns the
``numerics`` tests under each value printed here, so a result that holds only under one set of
kernels fails on this machine, not on a user's.  Usage: ``python tests/capabilities.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys

CANDIDATES = ("default", "avx2", "avx512")
PROBE = "import torch; print(torch.backends.cpu.get_cpu_capability().lower())"


def capability(value: str | None) -> str:
    """The kernels torch picks with ``ATEN_CPU_CAPABILITY=value`` (unset: the native choice)."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if value is not None:
        env["ATEN_CPU_CAPABILITY"] = value
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def others() -> list[str]:
    """Every candidate the CPU honours (torch reports it back), the native one left out."""
    native = capability(None)
    return [c for c in CANDIDATES if c != native and capability(c) == c]


if __name__ == "__main__":
    print(" ".join(others()))
