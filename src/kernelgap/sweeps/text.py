"""What ``kernelgap sweep`` prints: its ``--status``, and what a run did."""

from __future__ import annotations


def status_lines(s: dict) -> list[str]:
    return [
        f"{s['out']} ({s['name']}): {s['done']}/{s['total']} done, {s['left']} left, "
        f"{s['exact']} exact, {s['diverged']} diverged, {s['corrupt']} corrupted, "
        f"{s['lock_files']} lock files"
    ] + [
        f"corrupted: {why}"
        for why in [*s.get("damage", {}).values(), *s.get("family_damage", []), *s.get("file_damage", [])]
    ]


def summary_lines(s: dict) -> list[str]:
    lines = [
        f"{s['out']}: ran {s['ran']}, {s['done_before']} already done, {s['left']} left "
        f"of {s['total']} in {s['wall_time_s']:.1f}s; results.csv written"
    ]
    if s["skipped_locked"]:
        lines.append(f"{len(s['skipped_locked'])} runs are claimed by another sweep process")
    if s["set_aside"]:
        lines.append(f"{len(s['set_aside'])} corrupted result files renamed aside and redone")
        lines += [f"  {why}" for why in s.get("damage", {}).values()]
    return lines
