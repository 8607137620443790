"""The exhaustive verification's result as text (what ``kernelgap verify`` prints): a table of
every construction at every length, and the verdict (:mod:`.verify`)."""

from __future__ import annotations

from rich.table import Table


def verify_lines(payload: dict) -> list:
    """:func:`~.verify.verify_constructions`'s payload: a rich table, then the verdict line."""
    table = Table(title=f"Constructions on every sequence over {{0,1}}^{payload['m']}")
    for col in ("construction", "N", "sequences", "max error", "exact", "expected", "as expected"):
        table.add_column(col, justify="left" if col == "construction" else "right")
    for c in payload["checks"]:
        table.add_row(
            c["construction"],
            str(c["N"]),
            f"{c['sequences']:,}",
            f"{c['max_error']:.6f}",
            "yes" if c["exact"] else "no",
            "exact" if c["expected_exact"] else "fails",
            "yes" if c["as_expected"] else "NO",
        )
    wrong = [f"{c['construction']} at N = {c['N']}" for c in payload["checks"] if not c["as_expected"]]
    return [table, "every outcome as expected" if not wrong else f"not as expected: {', '.join(wrong)}"]
