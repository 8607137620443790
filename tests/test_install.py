"""The package stands alone: a wheel built from a clean copy of the working tree, installed into a
bare venv with only the dependencies it declares, carries the profiles and runs every command from
outside the checkout.  The base commands run before any extra is installed, so a module the code
imports but pyproject.toml does not declare fails here; then the ``ray`` and ``zoo`` extras are
installed in turn and exercised (a sweep on Ray, a probe of a library module).  pyproject.toml
declares ranges: a venv that already holds a torch other than the lock's keeps it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
TORCH = next(line for line in LOCK.read_text().splitlines() if line.startswith("torch=="))  # first, as `make install`
#: a torch in the declared range but not the lock's: the newest this machine's pip takes from its
#: own disk (a CUDA build, 5.5 GB in a venv), installed once into a venv under build/ (410 s seen)
#: a venv holding a torch other than the lock's (`make test-ends` passes its newest end)
OTHER_VENV = (
    Path(os.environ["KERNELGAP_OTHER_TORCH_VENV"]).resolve() if os.environ.get("KERNELGAP_OTHER_TORCH_VENV") else None
)

TINY_PROFILE = {
    "profile.toml": 'experiments = ["length"]\n[length]\nm = 2\n',
    "length.toml": 'name = "length"\n[family]\nname = "exhaustive"\nparams = {m = 2, length = 2}\n'
    '[model]\nfeature_map = "mlp_exp"\nrank = 1\n[train]\nmse_steps = 3\nmax_steps = 3\n',
}

# every command path of the installed app (groups included), one JSON list per path
LIST_COMMANDS = """
import json, typer.main
from kernelgap.cli import app
def walk(cmd, path):
    yield path
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from walk(sub, [*path, name])
print(json.dumps(list(walk(typer.main.get_command(app), []))))
"""


def run(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(map(str, args))}\n{done.stdout}{done.stderr}"
    return done


class Phases:
    """Wall time of each phase, printed at the end (``pytest -s`` shows it)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}

    def __call__(self, name: str, fn, *args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.times[name] = time.perf_counter() - start

    def report(self) -> str:
        return "\n".join(f"{seconds:6.1f} s  {name}" for name, seconds in self.times.items())


def build_wheel(tmp_path: Path) -> Path:
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
    return wheel


def bare_env(venv: Path) -> dict:
    """The environment of the fresh venv's processes: nothing of the development venv.  pip does
    not compile the bytecode (``--no-compile``: most of torch is never imported here) and the
    processes may write it, so the first import of torch compiles what it imports, once."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")}
    env.update(
        VIRTUAL_ENV=str(venv),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    return env


@pytest.mark.install
def test_wheel_installs_with_its_dependencies_and_runs(tmp_path):
    phase = Phases()
    wheel = phase("build the wheel", build_wheel, tmp_path)
    fresh = tmp_path / "fresh"
    phase("venv (with pip)", run, sys.executable, "-m", "venv", fresh, cwd=tmp_path)
    assert "include-system-site-packages = false" in (fresh / "pyvenv.cfg").read_text()
    env = bare_env(fresh)
    python, kernelgap = fresh / "bin" / "python", fresh / "bin" / "kernelgap"
    pip = (python, "-m", "pip", "install", "-q", "--no-compile")
    phase(f"pip install {TORCH}", run, *pip, TORCH, cwd=tmp_path, env=env)
    phase("pip install WHEEL (its dependencies)", run, *pip, wheel, cwd=tmp_path, env=env)

    work = tmp_path / "elsewhere"
    work.mkdir()
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=work, env=env)
    site = site.stdout.strip()
    where = run(
        python,
        "-c",
        "import kernelgap, kernelgap.experiments.profile as p; "
        "print(kernelgap.__file__); print(p.load_profile('paper').folder); print(p.profile_names())",
        cwd=work,
        env=env,
    )
    module, folder, names = where.stdout.split("\n")[:3]
    assert module.startswith(site) and folder.startswith(site) and names == "['paper', 'quick', 'wall']"
    assert (Path(folder) / "profile.toml").is_file() and (Path(folder).parents[1] / "ood" / "paper.toml").is_file()

    # the base commands, before any extra is installed: a tiny training first (it imports torch
    # and writes its bytecode), then every --help, certify and a tiny reproduce two at a time
    tiny_train = "train --family exhaustive -p m=2 -p length=2 --feature-map mlp_exp --rank 1 --mse-steps 3"
    trained = phase(
        "train (tiny)", run, kernelgap, *tiny_train.split(), "--max-steps", "3", "--json", cwd=work, env=env
    )
    assert json.loads(trained.stdout)["status"] == "ok"
    top = run(kernelgap, "--help", cwd=work, env=env).stdout
    paths = json.loads(run(python, "-c", LIST_COMMANDS, cwd=work, env=env).stdout)
    commands = sorted({p[0] for p in paths if p})
    assert {"certify", "train", "sweep", "probe", "reproduce"} <= set(commands)
    assert all(f"  {name} " in top for name in commands), top
    profile = work / "tiny"
    profile.mkdir()
    for name, text in TINY_PROFILE.items():
        (profile / name).write_text(text)
    jobs = {
        "certify --family witness": (kernelgap, "certify", "--family", "witness"),
        "reproduce (tiny, inline)": (
            kernelgap,
            "reproduce",
            "--profile",
            profile,
            "--out",
            work / "out",
            "--executor",
            "inline",
        ),  # fmt: skip
        **{f"{' '.join(p)} --help": (kernelgap, *p, "--help") for p in paths if p},
    }

    def timed(name):
        start = time.perf_counter()
        done = run(*jobs[name], cwd=work, env=env)
        return done, time.perf_counter() - start

    with ThreadPoolExecutor(2) as pool:
        outs = phase(f"certify, reproduce and {len(paths) - 1} --help, 2 at a time", dict, zip(jobs, pool.map(timed, jobs)))  # fmt: skip
    for name, (_, seconds) in outs.items():
        phase.times[f"  {name}"] = seconds
    for path in paths[1:]:
        assert f"Usage: kernelgap {' '.join(path)}" in outs[f"{' '.join(path)} --help"][0].stdout
    assert "--profile" in outs["reproduce --help"][0].stdout
    assert "certified: every exact nonnegative kernel model needs r ≥ 16" in outs["certify --family witness"][0].stdout
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["profile"] == "tiny" and {r["source"] for r in summary["length"]} == {"constructed", "trained"}
    assert oct((work / "out" / "summary.json").stat().st_mode & 0o777) == oct(0o666 & ~current_umask())

    # the ray extra: the tiny profile's sweep on a local Ray head; Ray's start-up lines go to
    # stderr, so the --json summary on stdout parses whole
    phase("pip install WHEEL[ray]", run, *pip, f"{wheel}[ray]", cwd=tmp_path, env=env)
    args = (
        "sweep",
        profile / "length.toml",
        "--out",
        work / "out-ray",
        "--executor",
        "ray",
        "--workers",
        "1",
        "--json",
    )
    swept = phase("sweep (tiny, --executor ray --workers 1 --json)", run, kernelgap, *args, cwd=work, env=env)
    assert json.loads(swept.stdout)["ran"] == 1 and len(list((work / "out-ray" / "runs").glob("*.json"))) == 1

    # the zoo extra: a library's attention module, as it ships, probed at rank 1 for 3 steps
    phase("pip install WHEEL[zoo]", run, *pip, f"{wheel}[zoo]", cwd=tmp_path, env=env)
    probe = (
        *("probe", "performer_pytorch:SelfAttention", "--interface", "layer"),
        *("--arg", "dim=d_model", "--arg", "heads=1", "--arg", "dim_head=d_model", "--arg", "nb_features=rank"),
        *("--ranks", "witness=1", "--seeds", "0", "--steps", "3", "--no-recipes", "--executor", "inline"),
        *("--out", work / "probe"),
    )
    phase("probe performer_pytorch:SelfAttention (rank 1, 3 steps)", run, kernelgap, *probe, cwd=work, env=env)
    (probed,) = json.loads((work / "probe" / "summary.json").read_text())["probes"]
    assert probed["class"] == "SelfAttention" and probed["interface"] == "layer"
    print(f"\ntest_install phases:\n{phase.report()}")


def test_the_lock_pins_a_version_in_every_declared_range():
    """requirements.lock (what `make install` installs) holds every dependency pyproject.toml
    declares, extras included, at a version inside its range: a range changed without `make lock`
    fails here."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"]]
    declared += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    pins = dict(line.split(" ")[0].split("==") for line in LOCK.read_text().splitlines() if "==" in line)
    pins = {canonicalize_name(name): version for name, version in pins.items()}
    assert len(declared) == 28 and pins["torch"] == "2.13.0+cpu"
    for req in declared:
        assert req.specifier.contains(pins[canonicalize_name(req.name)], prereleases=True), (req, pins.get(req.name))


def venv_holding_other_torch(venv: Path) -> Path:
    """A copy (hard-linked, so nothing the test installs reaches the original) of the venv
    ``KERNELGAP_OTHER_TORCH_VENV`` names: `make test-ends` passes its newest end, which holds a
    torch other than the lock's."""
    shutil.copytree(OTHER_VENV, venv, symlinks=True, copy_function=link_or_copy)
    return venv


def link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


@pytest.mark.install
@pytest.mark.skipif(OTHER_VENV is None, reason="needs a venv holding another torch: run by `make test-ends`")
def test_wheel_keeps_the_torch_it_finds(tmp_path):
    """pip installs the wheel beside a torch in its range (not the lock's) without replacing it,
    and ``certify --family witness`` and a 300-step ``train`` run on that torch."""
    phase = Phases()
    wheel = phase("build the wheel", build_wheel, tmp_path)
    venv = phase("venv holding another torch (hard-linked copy)", venv_holding_other_torch, tmp_path / "venv")
    env = bare_env(venv)
    python, kernelgap = venv / "bin" / "python", venv / "bin" / "kernelgap"
    version = (python, "-c", "from importlib.metadata import version; print(version('torch'))")
    other = run(*version, cwd=tmp_path, env=env).stdout.strip()
    assert other != TORCH.split("==")[1], "the venv holds the lock's torch: nothing to keep"
    phase("pip install WHEEL", run, python, "-m", "pip", "install", "-q", "--no-compile", wheel, cwd=tmp_path, env=env)
    assert run(*version, cwd=tmp_path, env=env).stdout.strip() == other

    certified = phase(
        "certify --family witness", run, kernelgap, "certify", "--family", "witness", cwd=tmp_path, env=env
    )
    assert "certified: every exact nonnegative kernel model needs r ≥ 16" in certified.stdout
    train = "train --family witness --feature-map table --rank 16 --mse-steps 100 --max-steps 200 --json"
    trained = json.loads(phase("train (300 steps)", run, kernelgap, *train.split(), cwd=tmp_path, env=env).stdout)
    assert trained["status"] == "ok" and trained["steps"] == 300 and trained["train"]["sequences"] == 736
    print(f"\ntest_install (torch {other}) phases:\n{phase.report()}")


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
