"""The layer family at scale: ``kernelgap certify --family layer …`` end to end, one fresh process
a command, printing its wall time, peak resident memory (``wait4``'s rusage) and what it certified
(docs/theory.md, "The whole set by rule"; docs/experiments.md, "The wall in context length").

Cases (``--case``, repeatable; default ``m30``):

* ``m28``, ``m30``, ``m32``: the largest Graham–Sloane class at δ = 1/2 and its least length
  ``N = 2 + ⌈√(n − 1)⌉`` (1,432,860 / 5,170,604 / 18,784,170 words);
* ``layer24``, ``layer26``: the whole middle layer (``-p distance=2``) at δ = 2/5 and its least
  length, ``N = 3 + ⌊√(16(n − 1))⌋`` (the least N with ``16/(N − 2)² < 1/(n − 1)``), and one shorter.

Each line checks the certified rank (all n at the least length, fewer one shorter) and, at the
least length, that the constructed rank equals it.

    python benchmarks/bench_layer_scale.py [--case m30] [--case layer24] …
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

_CHILD = "import sys; from kernelgap.cli import main; sys.exit(main())"


def whole_layer_length(n: int) -> int:
    """The least N with ``16/(N − 2)² < 1/(n − 1)``, i.e. ``(N − 2)² > 16(n − 1)``."""
    return 3 + math.isqrt(16 * (n - 1))


def class_length(n: int) -> int:
    """The least N with ``(N − 2)² ≥ n − 1``."""
    return 2 + math.isqrt(n - 2) + 1


#: name: (m, distance, delta, n, lengths)
CASES = {
    "m28": (28, 4, "1/2", 1_432_860),
    "m30": (30, 4, "1/2", 5_170_604),
    "m32": (32, 4, "1/2", 18_784_170),
    "layer24": (24, 2, "2/5", math.comb(24, 12)),
    "layer26": (26, 2, "2/5", math.comb(26, 13)),
}


def run(m: int, distance: int, delta: str, length: int) -> tuple[dict, float, int]:
    """One certify command in a child process: its JSON, wall seconds and peak RSS in bytes."""
    args = ["certify", "--family", "layer", "-p", f"m={m}", "-p", f"length={length}", "--json"]
    args += ["-p", "distance=2"] if distance == 2 else []
    args += ["--delta", delta]
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, *args], stdout=subprocess.PIPE)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"kernelgap {' '.join(args)}: exit status {os.waitstatus_to_exitcode(status)}")
    return json.loads(out), wall, usage.ru_maxrss * 1024


def case(name: str) -> None:
    m, distance, delta, n = CASES[name]
    least = whole_layer_length(n) if distance == 2 else class_length(n)
    for length in (least, least - 1) if distance == 2 else (least,):
        got, wall, rss = run(m, distance, delta, length)
        whole = got["certified_rank"] == n
        assert whole == (length == least), (name, length, got["certified_rank"])
        if whole:
            assert got["constructed_rank"] == n and got["bounds"]["radon"]["members"] == "all", got
        print(
            f"{name}: certify --family layer -p m={m}{' -p distance=2' if distance == 2 else ''} "
            f"-p length={length} --delta {delta}: r ≥ {got['certified_rank']:,} of {n:,} "
            f"(constructed {got['constructed_rank'] or 0:,}); {wall:.1f} s, peak RSS {rss / 2**30:.2f} GiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="a case to run (repeatable)")
    for name in parser.parse_args().case or ["m30"]:
        case(name)


if __name__ == "__main__":
    main()
