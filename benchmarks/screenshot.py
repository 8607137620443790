"""A report as a reader first sees it: ``report.html`` rendered by headless Chromium to a PNG
(the first screen, 1280×1600 by default), and the page's paragraphs and table cells over the
length limits of :mod:`kernelgap.report.glance` listed (exit 1 when there are any).

    python benchmarks/screenshot.py results/reproduce-quick/report.html [--out first-screen.png]
                                    [--size 1280,1600]

Needs a ``chromium`` (Debian: ``apt-get install -y chromium``) on the PATH.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelgap.report.glance import html_blocks, too_long


def screenshot(page: Path, out: Path, size: str = "1280,1600") -> Path:
    """Render ``page`` headless into ``out`` (a PNG of the first ``size`` pixels)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("error: no chromium on the PATH (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        flags += ["--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
        flags += [f"--user-data-dir={profile}", f"--screenshot={out.resolve()}", f"--window-size={size}"]
        subprocess.run([browser, *flags, page.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--size", default="1280,1600")
    args = ap.parse_args()
    if not args.report.is_file():
        raise SystemExit(f"error: {args.report} is not a file")
    out = screenshot(args.report, args.out or args.report.with_name("first-screen.png"), args.size)
    over = too_long(html_blocks(args.report.read_text()))
    print(f"screenshot: {out}")
    print(f"over the limits: {len(over)}", *(f"  {o}" for o in over), sep="\n")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
