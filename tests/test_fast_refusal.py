"""A refusal costs no torch import: bad arguments, seeds, devices, family names and files are
refused before torch is loaded, for every command.

A driver process imports ``kernelgap.cli`` (which imports no torch) and the torch-free modules
the refusals load (:data:`PRELOAD`), and forks one child per
refused command line; each child runs ``kernelgap.cli.main`` and reports its exit status,
its stderr and whether ``torch`` is in ``sys.modules`` afterwards.  No stopwatch: a refusal
that never imports torch is one that takes milliseconds beyond the interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgap.task import FAMILIES

#: Torch-free modules the refusals load, imported once by the driver before it forks (each
#: child would otherwise load them again): the children still start without torch.
PRELOAD = [
    "kernelgap.sweeps.config",
    "kernelgap.experiments.profile",
    "kernelgap.reproduction",
    "kernelgap.probe.config",
]

DRIVER = r"""
import contextlib, importlib, io, json, os, sys
import kernelgap.cli
assert "torch" not in sys.modules, "kernelgap.cli imports torch"
for name in json.loads(sys.argv[2]):
    importlib.import_module(name)
    assert "torch" not in sys.modules, f"{name} imports torch"
results = []
for argv in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        err, code = io.StringIO(), 0
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                kernelgap.cli.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:
            code, err = -1, io.StringIO(f"{type(exc).__name__}: {exc}")
        out = json.dumps({"code": code, "err": err.getvalue(), "torch": "torch" in sys.modules})
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        data = f.read()
    os.waitpid(pid, 0)
    results.append(json.loads(data))
print(json.dumps(results))
"""

HUGE = str(2**64)
#: Model and schedule flags with values their config models refuse.
MODEL_FLAGS = [
    ("--rank", "0"),
    ("--lr", "nan"),
    ("--lr", "0"),
    ("--temperature", "-1"),
    ("--kind", "dense"),
    ("--readout", "deep"),
    ("--d-value", "0"),
    ("--mse-steps", "-1"),
    ("--max-steps", "100000000"),
    ("--power", "0.5"),
]
#: Fields a softmax model is not built from, at values other than their defaults.
NOT_SOFTMAX = [("--feature-map", "elu1"), ("--feature-map", "table"), ("--rank", "8")]
FAMILY = ["--family", "exhaustive", "-p", "m=2", "-p", "length=2"]


#: Sweep files refused by their content: not TOML, an unknown section, a value out of range,
#: a field of the other model kind, a bad seed or device.
BAD_SWEEPS = [
    "name = ",
    'name = "x"\n[nope]\n',
    'name = "x"\n[family]\nname = "witness"\n[model]\nrank = -3\n',
    'name = "x"\n[family]\nname = "witness"\n[model]\nkind = "softmax"\nfeature_map = "elu1"\n',
    f'name = "x"\nseed = {2**64}\n[family]\nname = "witness"\n',
    'name = "x"\n[family]\nname = "witness"\n[train]\ndevice = "meta"\n',
    'name = "x"\n[family]\nname = "nope"\n',
]


def bad_sweeps(tmp: Path) -> list[Path]:
    paths = [tmp / f"bad-{i}.toml" for i in range(len(BAD_SWEEPS))]
    for path, text in zip(paths, BAD_SWEEPS):
        path.write_text(text)
    return paths


def refused_lines(tmp: Path) -> dict[str, list[list[str]]]:
    """Refused command lines of every command, by command (generated over the values each
    kind of argument refuses)."""
    missing = str(tmp / "missing")
    (tmp / "a-file").write_text("x\n")
    (tmp / "not-json.json").write_text("{")
    (tmp / "empty.json").write_text('{"m": 2}')
    seeds = ["-1", HUGE, str(2**100), "x", "1.5"]
    devices = ["meta", "cuda:x", "tpu", "", "cpu:-1", "hpu:0"]
    families = ["nope", "witness:x", ""]
    lines = {
        "train": [
            *(["train", *FAMILY, "--seed", s] for s in seeds),
            *(["train", *FAMILY, "--device", d] for d in devices),
            *(["train", "--family", f] for f in families),
            *(["train", "--family", name, "-p", "nope=1"] for name in FAMILIES),
            ["train", "--family", "ladder", "-p", "seed=-1"],
            *(
                ["train", "--family", path]
                for path in (missing + ".json", str(tmp / "not-json.json"), str(tmp / "empty.json"))
            ),
            ["train", "--family", str(tmp / "empty.json"), "-p", "m=2"],
            ["train", "--family", "witness", "--rank", "x"],
            *(["train", *FAMILY, flag, value] for flag, value in MODEL_FLAGS),
            *(["train", *FAMILY, "--kind", "softmax", flag, value] for flag, value in NOT_SOFTMAX),
            ["train", "--family", "witness", "--nope"],
            ["train"],
        ],
        "verify": [
            *(["verify", "--m", "2", "--device", d] for d in devices),
            ["verify", "--m", "x"],
            ["verify", "--m", "2", "--length", "0"],
        ],
        "probe": [
            ["probe", "kernelgap.probe.examples:DecayedLinearAttention", "--seeds", f"0,{HUGE}"],
            ["probe", "kernelgap.probe.examples:DecayedLinearAttention", "--seeds", "0,x"],
            ["probe", "kernelgap.probe.examples:DecayedLinearAttention", "--kwargs", "{"],
            ["probe"],
        ],
        "family": [["family", "nope", "--out", str(tmp / "f.json")], ["family", "witness", "-p", "x"]],
        "certify": [
            ["certify", missing],
            ["certify", str(tmp / "not-json.json")],
            ["certify", "--family", "nope"],
            ["certify", "--family", "witness", "--delta", "2"],
        ],
        "bound-curve": [["bound-curve", "--code", "nope"], ["bound-curve", "--m", "1..0"]],
        "bound": [["bound", "transcript", "--answers", "0", "--values", "2"]],
        "sweep": [
            ["sweep"],
            ["sweep", "x.toml", "--workers", "x"],
            ["sweep", missing + ".toml", "--out", str(tmp / "o")],
            *(["sweep", str(path), "--out", str(tmp / "o")] for path in bad_sweeps(tmp)),
            ["sweep", str(tmp / "a-file")],
        ],
        "reproduce": [["reproduce", "--workers", "x"], ["reproduce", "--nope"]],
        "report": [["report", missing], ["report", str(tmp / "a-file")]],
        "results": [["results", missing]],
        "compare": [["compare", missing, missing]],
        "check": [["check", missing], ["check", str(tmp / "a-file")], ["check", str(tmp)]],
        "wall": [
            ["wall", "--m", "7"],
            ["wall", "--m", "1"],
            ["wall", "--m", "x"],
            ["wall", "--delta", "0.7"],
            ["wall", "--delta", "2/5,x"],
            ["wall", "--rlimit", "0"],
            ["wall", "--nope"],
        ],
    }
    return lines


def run_driver(lines: list[list[str]], cwd: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(lines), json.dumps(PRELOAD)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> list[tuple[list[str], dict]]:
    tmp = tmp_path_factory.mktemp("refusals")
    lines = [argv for group in refused_lines(tmp).values() for argv in group]
    return list(zip(lines, run_driver(lines, tmp)))


def test_every_command_has_refusals_here(tmp_path):
    import typer.main

    from kernelgap.cli import app

    commands = set(typer.main.get_command(app).commands)
    assert commands <= set(refused_lines(tmp_path)), commands - set(refused_lines(tmp_path))


def not_refused_before_torch(refusals: list[tuple[list[str], dict]]) -> list[tuple[list[str], dict]]:
    """The command lines of ``refusals`` that did not end in one line ``error: …``, status 2,
    without importing torch (:func:`run_driver`'s results)."""
    return [
        (argv, result)
        for argv, result in refusals
        if result["code"] != 2
        or len(result["err"].strip().splitlines()) != 1
        or not result["err"].startswith("error: ")
        or result["torch"]
    ]


def test_every_refusal_is_one_line_exit_2_and_imports_no_torch(refusals):
    bad = not_refused_before_torch(refusals)
    assert not bad, "\n".join(f"kernelgap {' '.join(a)} → {r}" for a, r in bad[:10])


def test_the_driver_sees_torch_when_a_command_imports_it(tmp_path):
    """The check above can fail: a run that trains imports torch, and the driver says so."""
    (result,) = run_driver([["train", *FAMILY, "--feature-map", "nope"]], tmp_path)  # the maps' registry
    assert result["code"] == 2 and result["torch"]
