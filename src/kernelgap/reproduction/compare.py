"""``kernelgap compare DIR_A DIR_B``: the conclusions two reproductions (or probe folders)
of one profile differ on, read from their ``summary.json``.  Different CPUs round floats
differently, so a run can cross a threshold: what matters is whether a *conclusion* changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import KernelgapError
from ..experiments.registry import experiments as registered
from ..io import read_json
from .record import read_meta
from .render import markdown_table, present
from .schema import probe_summary_problem, summary_problem
from .summary import reproduction_experiments

#: The prefix of a conclusion read from a row of "The paper beside ours".
PAPER_ROW = "paper beside ours: "
#: How a conclusion one folder lacks is shown.
ABSENT = "(absent)"
#: The columns of a table of differences (:meth:`Difference.cells`).
COLUMNS = ["experiment", "conclusion", "A", "B"]


@dataclass(frozen=True)
class Difference:
    """One conclusion of one experiment on which the folders differ (``None``: absent there)."""

    experiment: str
    conclusion: str
    value_a: str | None
    value_b: str | None

    def to_json(self) -> dict:
        return {"experiment": self.experiment, "conclusion": self.conclusion, "a": self.value_a, "b": self.value_b}

    def cells(self) -> dict[str, str]:
        """Its row of a table (:data:`ABSENT` where a folder lacks the conclusion)."""
        a, b = (ABSENT if v is None else v for v in (self.value_a, self.value_b))
        return {"experiment": self.experiment, "conclusion": self.conclusion, "A": a, "B": b}


@dataclass(frozen=True)
class Comparison:
    """Two folders of one profile: how many conclusions were compared, and which differ."""

    folder_a: Path
    folder_b: Path
    kind: str  # "reproduction" or "probe"
    profile: str
    versions: tuple[str, str]
    compared: int
    differences: list[Difference]

    @property
    def agree(self) -> bool:
        return not self.differences

    def to_json(self) -> dict:
        return {
            "a": str(self.folder_a),
            "b": str(self.folder_b),
            "kind": self.kind,
            "profile": self.profile,
            "versions": {"a": self.versions[0], "b": self.versions[1]},
            "compared": self.compared,
            "differ": len(self.differences),
            "differences": [d.to_json() for d in self.differences],
        }


def _read(folder: Path) -> tuple[dict, str]:
    """A folder's summary and its kind (``reproduction`` or ``probe``), checked."""
    if not folder.is_dir():
        raise KernelgapError(f"results folder {folder} does not exist")
    path = folder / "summary.json"
    if not path.is_file():
        raise KernelgapError(f"{folder} holds no summary.json; run `kernelgap report {folder}` first")
    summary = read_json(path)
    if summary is None:
        raise KernelgapError(f"{path} is damaged (not valid JSON); run `kernelgap report {folder}` to rebuild it")
    if isinstance(summary, dict) and "schema_version" not in summary and isinstance(summary.get("probes"), list):
        why = probe_summary_problem(summary)
        kind = "probe"
    else:
        why = summary_problem(summary)
        kind = "reproduction"
    if why is not None:
        raise KernelgapError(f"{path} is damaged ({why}); run `kernelgap report {folder}` to rebuild it")
    return summary, kind


def _experiments(folder: Path, kind: str) -> list:
    """The experiments of a folder's summary: the built-in ones and the profile's own where they still load."""
    if kind == "probe":
        return [e for e in registered() if e.name == "probe"]
    try:
        return reproduction_experiments(read_meta(folder))
    except KernelgapError:
        return list(registered())


def conclusions(summary: dict, experiments, where: Path | str = "summary.json") -> dict[str, dict[str, str]]:
    """``{experiment: {conclusion: value}}`` of a summary (a row's ``conclusion``, else its
    ``ours``); a section its experiment cannot read is one line naming ``where``."""
    out: dict[str, dict[str, str]] = {}
    for exp in experiments:
        found: dict[str, str] = {}
        try:
            if exp.conclusions is not None and present(summary, exp):
                found.update({str(k): str(v) for k, v in exp.conclusions(summary).items()})
            for row in exp.paper_rows(summary) if exp.paper_rows and present(summary, exp) else []:
                value = row["conclusion"] if "conclusion" in row else row.get("ours")
                if value is not None:
                    found[PAPER_ROW + str(row["quantity"])] = str(value)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise KernelgapError(
                f"{where} is damaged: its {exp.name!r} section cannot be read ({type(exc).__name__}: {exc})"
            ) from None
        if found:
            out[exp.name] = found
    return out


def compare_folders(dir_a: str | Path, dir_b: str | Path) -> Comparison:
    """Every conclusion two reproductions (or two probe folders) of one profile differ on."""
    folder_a, folder_b = Path(dir_a), Path(dir_b)
    (a, kind_a), (b, kind_b) = _read(folder_a), _read(folder_b)
    if kind_a != kind_b:
        raise KernelgapError(
            f"{folder_a} is a {kind_a} folder and {folder_b} a {kind_b} folder; compare two of one kind"
        )
    if a.get("profile") != b.get("profile"):
        raise KernelgapError(
            f"{folder_a} and {folder_b} reproduce different profiles ({a.get('profile')!r} and "
            f"{b.get('profile')!r}); compare two reproductions of one profile"
        )
    exps = {e.name: e for e in _experiments(folder_a, kind_a)}
    exps.update({e.name: e for e in _experiments(folder_b, kind_b) if e.name not in exps})
    ca = conclusions(a, exps.values(), folder_a / "summary.json")
    cb = conclusions(b, exps.values(), folder_b / "summary.json")
    differences, compared = [], 0
    for name in exps:
        mine, theirs = ca.get(name, {}), cb.get(name, {})
        keys = list(mine) + [k for k in theirs if k not in mine]
        compared += len(keys)
        differences += [
            Difference(name, key, mine.get(key), theirs.get(key)) for key in keys if mine.get(key) != theirs.get(key)
        ]
    versions = (str(a.get("version", "?")), str(b.get("version", "?")))
    return Comparison(folder_a, folder_b, kind_a, str(a.get("profile")), versions, compared, differences)


def compare(dir_a: str | Path, dir_b: str | Path) -> list[Difference]:
    """The conclusions on which two reproductions of one profile differ (:func:`compare_folders`)."""
    return compare_folders(dir_a, dir_b).differences


def headline(c: Comparison, sentence: bool = False) -> str:
    """``3 of 212 conclusions differ`` or ``all 212 conclusions agree`` (or as a ``sentence``)."""
    text = (
        f"all {c.compared} conclusions agree" if c.agree else f"{len(c.differences)} of {c.compared} conclusions differ"
    )
    return text[:1].upper() + text[1:] + "." if sentence else text


def markdown(c: Comparison) -> str:
    """The comparison as a Markdown page: the two folders, the count, a table of differences."""
    lines = [
        f"# kernelgap compare: {c.profile} ({c.kind})",
        "",
        f"A: `{c.folder_a}` (kernelgap {c.versions[0]}); B: `{c.folder_b}` (kernelgap {c.versions[1]}).",
        "",
        headline(c, sentence=True),
    ]
    if c.differences:
        lines += ["", *markdown_table([d.cells() for d in c.differences], COLUMNS)]
    return "\n".join(lines) + "\n"


def print_comparison(c: Comparison, console=None) -> None:
    """The differences as a table on the terminal, then the count (text never read as markup)."""
    console = console or Console(highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 160)
    console.print(Text(f"A: {c.folder_a} (kernelgap {c.versions[0]})\nB: {c.folder_b} (kernelgap {c.versions[1]})"))
    if c.differences:
        table = Table(title=Text(f"Conclusions that differ ({c.profile} {c.kind})"))
        for col in COLUMNS:
            table.add_column(col, overflow="fold")
        for d in c.differences:
            table.add_row(*map(Text, d.cells().values()))
        console.print(table)
    console.print(Text(headline(c, sentence=True)))
