"""A run record as text (what ``kernelgap train`` prints): status, steps, the train metrics and,
for a product family, what it was scored on, for a run with fresh starts, its tries, for a distilled
run, its teacher, for a pruned one, its wide run (:mod:`.trainer`, :mod:`.product`, :mod:`.distill`,
:mod:`.prune`)."""

from __future__ import annotations

from ..task.family import count_text


def run_lines(record: dict) -> list[str]:
    """The lines of one run record."""
    m = record["train"]

    def num(key: str) -> str:
        return "none" if m.get(key) is None else f"{m[key]:.4f}"

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
        tries = ", ".join("none" if t["max_error"] is None else f"{t['max_error']:.4f}" for t in record["restarts"])
        lines.append(f"tries: {len(record['restarts'])} (max errors {tries}; the best is kept)")
    if record.get("distilled"):  # a run distilled from a table (training/distill.py)
        d, t = record["distilled"], record["distilled"]["teacher"]
        err = "none" if t["max_error"] is None else f"{t['max_error']:.4f}"
        lines.append(
            f"distilled from a {t['feature_map']} of the same rank: teacher max_error={err} after {t['steps']} steps; "
            f"attention fitted in {d['fit_steps']} steps (KL {d['kl']:.4f})"
        )
    if record.get("pruned"):  # a run cut from a wider table (training/prune.py)
        p, w = record["pruned"], record["pruned"]["wide"]
        err = "none" if w["max_error"] is None else f"{w['max_error']:.4f}"
        lines.append(
            f"pruned from rank {p['from_rank']}: wide max_error={err} after {w['steps']} steps; "
            f"{p['own_features']} queries' own features kept"
        )
    return lines
