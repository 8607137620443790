"""The ``kernelgap`` command line: parses arguments and delegates, nothing else.

Every user error (a :class:`~kernelgap.errors.KernelgapError` or a bad flag) is printed as one
line ``error: …`` on stderr with exit status 2 (``wall``: :mod:`kernelgap.theory.wall_command`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import click
import typer
import typer.main

from . import __version__
from .args import PROBE_FLAGS, bounded_flags, field_signature, given_fields, key_values, parse_range
from .errors import KernelgapError, one_line
from .sweeps.interrupts import interrupted, settle_interrupt, watch_interrupts
from .theory.wall_command import wall_cmd
from .theory.work import DEFAULT_GUARD_S

app = typer.Typer(
    help="Measure, prove and show where nonnegative kernel attention stops matching softmax.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# The options several commands take, each said once.
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output (JSON).")]
Params = Annotated[list[str], typer.Option("-p", "--param", help="Family parameter key=value (repeatable).")]
Executor = Annotated[str, typer.Option("--executor", help="local (process pool), ray or inline.")]
Workers = Annotated[int | None, typer.Option("--workers", help="Tasks run at once (default: the cores).")]
Address = Annotated[str | None, typer.Option("--address", help="Ray cluster HOST:PORT (ray executor).")]
#: The commands whose config fields' flags are not in their signature yet (:func:`fields_command`).
_PENDING: dict[str, Callable[[], None]] = {}


def fields_command(name: str, fields: Callable[[], dict], flags: dict | None = None):
    """Register the command ``name``, which takes besides its own parameters a flag per config
    field ``fields()`` returns (:func:`~kernelgap.args.field_signature`; ``flags``: a
    :class:`~kernelgap.args.Flag` per field that does not spell its own).  The flags join its
    signature when :func:`main` runs it, so that no other command imports its config models."""

    def register(command):
        command.__signature__ = field_signature(command)  # its own parameters, for another command's run
        _PENDING[name] = lambda: setattr(command, "__signature__", field_signature(command, fields(), flags))
        return app.command(name)(command)

    return register


def _with_registered_choices(command: click.Group, argv: list[str]) -> click.Group:
    """``--feature-map`` of the invoked subcommand as a choice of the registered maps, listed
    in its ``--help``, and ``bound-curve --code``'s help the registered series.  Only a help
    page reads the maps' registry (which imports torch): a run's map is checked by its model
    spec, after the arguments torch is not needed for (:mod:`kernelgap.training.command_line`)."""
    sub = command.commands.get(argv[0]) if argv else None
    for param in getattr(sub, "params", []):
        if param.name == "feature_map" and "--help" in argv:
            from .models import FEATURE_MAPS

            param.type = click.Choice(list(FEATURE_MAPS))
            param.metavar = "[" + "|".join(FEATURE_MAPS) + "]"
        elif param.name == "code" and argv[0] == "bound-curve":
            from .theory.bound_curve import SERIES

            *rest, last = SERIES
            param.help = f"{', '.join(rest)} or {last}."
    return bounded_flags(command)  # every number flag bounded (kernelgap.args)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kernelgap {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """kernelgap: Min-IP, kernel attention, certificates and sweeps."""


def emit(payload: dict, as_json: bool, render) -> None:
    """Print ``payload`` as JSON, or the lines ``render(payload)`` returns (text, or a rich
    table printed as one); a ``render`` that prints by itself returns None."""
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    for line in render(payload) or []:
        if isinstance(line, str):
            typer.echo(line)
        else:
            from rich.console import Console

            Console().print(line)


# -- verify -------------------------------------------------------------------------


@app.command()
def verify(
    m: int = typer.Option(..., "--m", help="Token dimension; all sequences over {0,1}^m are checked."),
    length: list[str] = typer.Option(
        [], "--length", help="Context lengths N (repeatable; 4, 1..5, 1..9..2 or 1,2,5); default 1, 2, 3."
    ),
    as_json: Json = False,
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
) -> None:
    """Check every construction (docs/theory.md, "Constructions") on every sequence of each
    length N against the theory's outcome (rank 1 fails from N = 3, the others are exact);
    exit status 1 when some outcome is not the expected one."""
    from .limits import check_verify
    from .run_values import device_problem

    lengths = check_verify(m, parse_range(length, "--length", "N", least=1) if length else None)
    if device_problem(device) is not None:  # before torch is imported
        raise KernelgapError(f"--device: {device_problem(device)}")
    from .models.text import verify_lines
    from .models.verify import verify_constructions

    payload = verify_constructions(m, device=device, lengths=lengths)
    emit(payload, as_json, verify_lines)
    if not payload["as_expected"]:
        sys.exit(1)  # not typer.Exit: main() runs click non-standalone, which returns its code instead


# -- certificate commands (family, certify, bound-curve, bound …) ----------------------


@app.command("family")
def family_cmd(
    name: str = typer.Argument(..., help="Registered family name (witness, hadamard, cw, exhaustive, pool, …)."),
    param: Params = (),
    out: str = typer.Option(..., "--out", help="Family JSON file to write."),
    force: bool = typer.Option(False, "--force", help="Replace an existing file."),
    as_json: Json = False,
) -> None:
    """Build a registered family and write it as a family file."""
    from .task.text import write_family, written_lines

    emit(write_family(name, key_values(param), out, force), as_json, written_lines)


@app.command("certify")
def certify_cmd(
    path: str | None = typer.Argument(None, help="Family JSON file (or use --family)."),
    family: str | None = typer.Option(None, "--family", help="Registered family name instead of a file."),
    param: Params = (),
    delta: str = typer.Option("1/2", "--delta", help="Tolerance δ as P/Q; 1/2 means max error < 1/2."),
    budget: float = typer.Option(DEFAULT_GUARD_S, "--budget", help="Hang guard (s); the searches count work."),
    as_json: Json = False,
) -> None:
    """Certify a rank lower bound for every exact nonnegative kernel model on a family."""
    from .task import build_family, parse_params
    from .task.family_file import load_family
    from .theory.construction import certify_and_construct
    from .theory.text import describe_certificate, describe_construction

    if (path is None) == (family is None):
        raise KernelgapError("give either a family file or --family NAME (not both)")
    if path is not None and param:
        raise KernelgapError("-p parameters only apply with --family")
    fam = load_family(path) if path else build_family(family, **parse_params(family, key_values(param)))
    if not budget >= 0:
        raise KernelgapError(f"--budget must be ≥ 0 seconds, got {budget}")
    payload = certify_and_construct(fam, delta, budget)  # the one-hot constructions checked torch-free
    emit(payload, as_json, lambda p: describe_certificate(p) + describe_construction(p))


@app.command(
    "bound-curve",
    help="Certified rank against m for a family series, beside 2^m and softmax's m (PNG + JSON); for "
    "--code layer, the smallest context length N certifying the whole code at each m and δ, with its share of "
    "2^m beside the ceiling of pair certificates, or with --length the certified rank against N "
    '(docs/theory.md, "The layer family").',
)
def bound_curve_cmd(
    code: str = typer.Option("hadamard", "--code", help="A registered series (listed when the command runs)."),
    m: str = typer.Option("12..96", "--m", help="m values: 12..96, 12..96..4 or 12,24,48."),
    queries: int | None = typer.Option(None, "--queries", help="Most queries per family (default 128; ladder 8192)."),
    chain_step: int = typer.Option(4, "--chain-step", help="Overlap step of the amplification chains (hadamard, cw)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the ladder families' codes."),
    length: str | None = typer.Option(
        None, "--length", help="--code layer: context lengths N (3..40, 3..40..4 or 11,31): the rank against N."
    ),
    delta: str | None = typer.Option(
        None, "--delta", help="--code layer: tolerances δ (default 1/2; e.g. 1/2,2/5): δ < 1/2 takes the whole layer."
    ),
    out: str | None = typer.Option(
        None,
        "--out",
        help="Folder for bound-curve-<code>.json/.png/.svg (layer: also -ratio.*, with --length -length.*).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace an earlier curve of this --code in --out."),
    as_json: Json = False,
) -> None:
    """One parameter per flag (typer reads the flags from the signature); help: the decorator's."""
    from .theory.bound_curve import bound_curve, curve_lines, write_curve

    ms = parse_range(m, "--m", "m", least=2)
    lengths = None if length is None else parse_range(length, "--length", "N", least=3)
    deltas = None if delta is None else delta.split(",")
    payload = bound_curve(code, ms, queries, chain_step, seed, lengths, None if as_json else typer.echo, deltas)
    if out is not None:
        payload["files"] = write_curve(payload, Path(out), force)
    emit(payload, as_json, lambda p: curve_lines(p) + [f"wrote {path}" for path in p.get("files", [])])


bound_app = typer.Typer(help="Information bounds.", no_args_is_help=True)
app.add_typer(bound_app, name="bound")
app.command("wall")(wall_cmd)  # the exact-wall table (kernelgap.theory.wall_command)


@bound_app.command("transcript")
def bound_transcript_cmd(
    answers: int = typer.Option(..., "--answers", help="q: number of independent answers."),
    values: int = typer.Option(..., "--values", help="s + 1: values each answer can take."),
    features: int | None = typer.Option(None, "--features", help="Sketch features r."),
    value_dim: int = typer.Option(1, "--value-dim", help="Sketch value dimension d."),
    heads: int = typer.Option(1, "--heads", help="Sketch heads h."),
    bits: int = typer.Option(32, "--bits", help="Bits per number."),
    as_json: Json = False,
) -> None:
    """Finite-precision transcript bound q·log2(s+1) and a sketch's capacity (docs/experiments.md)."""
    from .theory.text import transcript_lines
    from .theory.transcript import transcript_bound

    emit(transcript_bound(answers, values, features, value_dim, heads, bits), as_json, transcript_lines)


# -- training commands (train, sweep) ---------------------------------------------------


def _train_fields() -> dict:
    from .training.command_line import train_fields

    return train_fields()


@fields_command("train", _train_fields)
def train(
    family: str = typer.Option(..., "--family", help="Registered family name (e.g. witness) or a family file."),
    params: Params = (),
    *,
    no_early_stop: bool = typer.Option(False, "--no-early-stop", help="Train every step even once exact."),
    as_json: Json = False,
    **given,
) -> None:
    """Train one model (the calibrated schedule) and print its metrics."""
    from .training.command_line import command_line_run

    run = command_line_run(family, params, given_fields(given), early_stop=not no_early_stop)
    from .training.text import run_lines
    from .training.trainer import train_watched

    emit(train_watched(run, sys.stderr), as_json, run_lines)  # live progress where stderr is a terminal


@app.command(help="Run a sweep resumably (skips finished runs), or report its --status.")
def sweep(
    target: str = typer.Argument(..., help="Sweep config (TOML), or a results folder to resume / inspect."),
    out: str | None = typer.Option(None, "--out", help="Results folder (required with a config file)."),
    status: bool = typer.Option(False, "--status", help="Report done/left for a results folder and exit."),
    executor: Executor = "local",
    workers: Workers = None,
    address: Address = None,
    cpus: float = typer.Option(1.0, "--cpus-per-task", help="Ray CPUs per task (fractions allowed)."),
    gpus: float = typer.Option(0.0, "--gpus-per-task", help="Ray GPUs per task (fractions allowed)."),
    as_json: Json = False,
) -> None:
    """One parameter per flag (typer reads the flags from the signature); help: the decorator's."""
    from .sweeps.config import check_sweep

    if not status:
        check_sweep(target, out)
    from .sweeps import run_sweep, sweep_status
    from .sweeps.runner import status_lines, summary_lines

    if status:
        emit(sweep_status(target), as_json, status_lines)
        return
    summary = run_sweep(
        target, out, executor=executor, workers=workers, address=address, cpus=cpus, gpus=gpus, progress=not as_json
    )
    emit({**summary.__dict__, "left": summary.left}, as_json, summary_lines)


@app.command()
def check(
    folder: Path = typer.Argument(..., help="A sweep's results folder, or a reproduction or probe folder."),
    as_json: Json = False,
) -> None:
    """Verify a results folder without changing it: run records, checkpoints (size, sha256),
    family copies, summary.json against the runs; one line per problem, exit 2 if any."""
    from .reproduction.report import folder_damage, summary_drift
    from .sweeps.verify import check_folder, check_lines

    result = check_folder(folder, summary_check=summary_drift, damage=folder_damage)
    emit(result, as_json, check_lines)
    if result["problems"]:
        raise KernelgapError(f"{folder}: {len(result['problems'])} problem(s) found; nothing was changed")


# -- reproduction commands (reproduce, report, probe) -----------------------------------


def _probe_fields() -> dict:
    """:class:`~kernelgap.probe.config.ProbeConfig`'s fields."""
    from .probe.config import ProbeConfig

    return dict(ProbeConfig.model_fields)


@fields_command("probe", _probe_fields, PROBE_FLAGS)
def probe(*, as_json: Json = False, **given) -> None:
    """Train any attention module on the witness and OOD suites beside the built-in elu1; write
    report.html; print a verdict per suite and rank (--json: the same rows as JSON)."""
    from .probe.config import ProbeConfig

    config = ProbeConfig(**given_fields(given, PROBE_FLAGS))  # checked as it is made
    from .experiments.probe.table import probe_rows_of
    from .probe.runner import run_probe  # torch: after the flags are checked
    from .reproduction import build_probe_report

    log = (lambda line: typer.echo(line, err=True)) if as_json else typer.echo
    folder = config.folder(run_probe(config, log=log)["class"])
    build_probe_report(folder, log=log)
    rows = probe_rows_of(folder)
    emit({"verdicts": rows}, as_json, lambda payload: [r["text"] for r in payload["verdicts"]])


@app.command()
def reproduce(
    profile: str = typer.Option("quick", "--profile", help="quick, paper, wall, or a folder holding profile.toml."),
    out: Path | None = typer.Option(None, "--out", help="Results folder (default results/reproduce-PROFILE)."),
    executor: Executor = "local",
    workers: Workers = None,
    address: Address = None,
) -> None:
    """Run the paper's experiments (resumable) and write summary.json, figures, report.html."""
    from .experiments.profile import load_profile

    load_profile(profile)  # a bad profile refused before torch is imported
    from .reproduction.pipeline import reproduce as run

    run(profile, out, executor=executor, workers=workers, address=address, log=typer.echo)


@app.command()
def report(
    folder: Path = typer.Argument(..., help="A folder written by `kernelgap reproduce` or `kernelgap probe`."),
) -> None:
    """Rebuild summary.json and report.html from the result files (no training)."""
    from .reproduction.report import report_folder
    from .sweeps.store import is_valid_record

    report_folder(folder, log=typer.echo, valid=is_valid_record)


@app.command()
def results(
    folders: list[Path] = typer.Argument(..., help="Reproduction folders (summary.json), or probe folders."),
    out: Path | None = typer.Option(None, "--out", help="Write the page here (e.g. docs/results.md)."),
) -> None:
    """The measured numbers of reproduction folders as a Markdown page (docs/results.md), or
    of probe folders as one table: module, suite, rank, features, verdict."""
    from .io import write_page
    from .reproduction.results_page import results_page

    text = results_page(folders)
    if out is None:
        typer.echo(text, nl=False)
        return
    write_page(out, text)
    typer.echo(f"results: {out}")


@app.command()
def compare(
    dir_a: Path = typer.Argument(..., metavar="DIR_A", help="A reproduction (or probe) folder holding summary.json."),
    dir_b: Path = typer.Argument(..., metavar="DIR_B", help="Another of the same profile, e.g. run on another CPU."),
    as_json: Json = False,
    out: Path | None = typer.Option(None, "--out", help="Also write the differences here as Markdown."),
) -> None:
    """List every conclusion (verdict, count, transition rank) two reproductions of one profile
    differ on; exit 0 when all agree, 1 when some differ, 2 on bad input."""
    from .io import write_page
    from .reproduction.compare import compare_folders, markdown, print_comparison

    result = compare_folders(dir_a, dir_b)
    if out is not None:
        write_page(out, markdown(result))
    emit(result.to_json(), as_json, lambda _: print_comparison(result))
    if not result.agree:
        sys.exit(1)  # as verify: main() runs click non-standalone


def main(argv: list[str] | None = None) -> None:
    """Console entry point with one-line errors and exit status 2; an interrupt (Ctrl-C, or a
    module raising ``KeyboardInterrupt``) is one line and status 130 (:mod:`.sweeps.interrupts`).
    Click run non-standalone returns the status of a ``typer.Exit`` instead of raising it."""
    watch_interrupts(console=argv is None)
    try:
        args = sys.argv[1:] if argv is None else list(argv)
        _PENDING.pop(args[0] if args else "", lambda: None)()  # the invoked command's field flags
        code = _with_registered_choices(typer.main.get_command(app), args)(args=args, standalone_mode=False)
    except KernelgapError as exc:
        if not interrupted():  # else an error that an interrupt caused: the interrupt's line
            typer.echo(f"error: {one_line(exc)}", err=True)
            sys.exit(2)
        code = 130
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except typer.TyperException as exc:  # bad flags and values, from typer's parser
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        typer.echo(f"error: {one_line(' '.join(str(message).split()))}", err=True)
        sys.exit(2)
    code = settle_interrupt(code, console=argv is None)
    if isinstance(code, int) and not isinstance(code, bool) and code:
        sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
