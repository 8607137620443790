"""A run record as text (what ``kernelgap train`` prints)."""

from __future__ import annotations

from ..task.family import count_text


def four(x: float | None) -> str:
    return "none" if x is None else f"{x:.4f}"


def run_lines(record: dict) -> list[str]:
    """The lines of one run record."""
    m = record["train"]

    def num(key: str) -> str:
        return four(m.get(key))

    lines = [
        f"run {record['id']}  status={record['status']}  steps={record['steps']}  wall={record['wall_time_s']:.1f}s",
        f"train: max_error={num('max_error')} exact={m['exact']} "
        f"exact_seq_acc={num('exact_seq_acc')} mean_abs_error={num('mean_abs_error')}",
    ]
    if "evaluated" in m:  # a product family (training/product.py)
        lines.append(f"scored on: {m['evaluated']}, {count_text(m['sequences'])} sequences")
        if m.get("whole_family"):
            w = m["whole_family"]
            lines.append(f"whole family (exact worst case): max_error={w['max_error']:.4f} exact={w['exact']}")
    if record.get("restarts"):  # a run with fresh starts (training/restarts.py)
        tries = ", ".join(four(t["max_error"]) for t in record["restarts"])
        lines.append(f"tries: {len(record['restarts'])} (max errors {tries}; the best is kept)")
    if record.get("distilled"):  # a run distilled from a table (training/distill.py)
        d, t = record["distilled"], record["distilled"]["teacher"]
        lines.append(
            f"distilled from a {t['feature_map']} of the same rank: teacher max_error={four(t['max_error'])} "
            f"after {t['steps']} steps; "
            f"attention fitted in {d['fit_steps']} steps (KL {d['kl']:.4f})"
        )
    if record.get("pruned"):  # a run cut from a wider table (training/prune.py)
        p, w = record["pruned"], record["pruned"]["wide"]
        lines.append(
            f"pruned from rank {p['from_rank']}: wide max_error={four(w['max_error'])} after {w['steps']} steps; "
            f"{p['own_features']} queries' own features kept"
        )
    return lines
