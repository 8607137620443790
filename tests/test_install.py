"""The package stands alone: a wheel built from a clean copy of the working tree carries the
profiles, and ``kernelgap reproduce`` runs from a non-editable install outside the checkout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TINY_PROFILE = {
    "profile.toml": 'experiments = ["length"]\n[length]\nm = 2\n',
    "length.toml": 'name = "length"\n[family]\nname = "exhaustive"\nparams = {m = 2, length = 2}\n'
    '[model]\nfeature_map = "mlp_exp"\nrank = 1\n[train]\nmse_steps = 3\nmax_steps = 3\n',
}


def run(*args, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.slow
def test_wheel_installs_and_reproduces(tmp_path):
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    copy = tmp_path / "clean"
    for name in files:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        copy,
        "-w",
        tmp_path / "dist",
        cwd=tmp_path,
    )
    (wheel,) = (tmp_path / "dist").glob("kernelgap-*.whl")
    fresh = tmp_path / "fresh"
    run(sys.executable, "-m", "venv", "--without-pip", fresh, cwd=tmp_path)
    python = fresh / "bin" / "python"
    site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout.strip()
    )
    run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path
    )
    # the dependencies (torch, numpy, …) come from this environment; kernelgap only from the wheel
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = run(
        python,
        "-c",
        "import kernelgap, kernelgap.experiments.profile as p; "
        "print(kernelgap.__file__); print(p.load_profile('paper').folder); print(p.profile_names())",
        cwd=work,
    )
    module, folder, names = where.stdout.split("\n")[:3]
    assert module.startswith(str(site)) and folder.startswith(str(site)) and names == "['paper', 'quick', 'wall']"
    assert (Path(folder) / "profile.toml").is_file() and (Path(folder).parents[1] / "ood" / "paper.toml").is_file()
    kernelgap = fresh / "bin" / "kernelgap"
    assert "--profile" in run(kernelgap, "reproduce", "--help", cwd=work).stdout
    profile = work / "tiny"
    profile.mkdir()
    for name, text in TINY_PROFILE.items():
        (profile / name).write_text(text)
    run(kernelgap, "reproduce", "--profile", profile, "--out", work / "out", "--executor", "inline", cwd=work)
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["profile"] == "tiny" and {r["source"] for r in summary["length"]} == {"constructed", "trained"}
    assert oct((work / "out" / "summary.json").stat().st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
