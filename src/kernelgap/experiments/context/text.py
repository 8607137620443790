"""The context experiment's sentences, conclusions and paper row, computed from its section of
``summary.json`` (docs/experiments.md, "The wall in context length").

Each tolerance δ of the run has its code and its wall (docs/theory.md, "The layer family"):
at δ = 1/2 the largest Graham–Sloane class, below 1/2 the whole weight-m/2 layer.  Beside
them the report says how close to ``2^m`` each gets (``r/2^m`` and ``log2 r / m`` at its
largest m), the ceiling of every pair certificate (the rows' ``ceiling``, from
:mod:`kernelgap.theory.ceiling`) and whether the run reaches it, and what the paper's
"approaches 2^m" means exactly: ``C(m, m/2) = 2^m √(2/(πm))(1 + o(1))``, so the exponent
tends to 1 while the ratio tends to 0.  No number is typed in.
"""

from __future__ import annotations

from ...report.criteria import grouped
from ...report.figures import delta_of
from ...report.html import fmt, yes_no
from ...report.trained import trained_conclusions

#: What the paper claims (kept verbatim in summary.json under ``paper.context``).
PAPER = {
    "claim": "as the fixed context length N grows, the lower bound approaches the 2^m features "
    "of the positive construction",
    "log2_rank_per_m": 1.0,
}
#: The tolerance of the Graham–Sloane rows (rows written before δ was recorded have it).
HALF = "1/2"


def rule(row: dict) -> str:
    """The least N the pair bound predicts (rows written before the rule was recorded: δ = 1/2's)."""
    return row.get("length_rule") or "2 + ⌈√(n − 1)⌉"


def code_words(row: dict) -> str:
    return "the whole weight-m/2 layer" if row.get("distance") == 2 else "the largest Graham–Sloane class"


def wall_text(p: dict) -> str:
    """``at m = 16 the certificate reaches all 810 code words from N = 31 (785 at N = 30)``."""
    if p["length"] is None:
        return f"at m = {p['m']} the certificate reaches {p['certified']:,} of {p['n']:,} code words, never all"
    below = f" ({p['certified_below']:,} at N = {p['below_length']:,})" if p["below_length"] is not None else ""
    return f"at m = {p['m']} the certificate reaches all {p['n']:,} code words from N = {p['length']:,}{below}"


def _guess_text(wall: list[dict]) -> str:
    off = [p for p in wall if not p["formula_holds"]]
    if not off:
        bound = "1/(N − 2)²" if delta_of(wall[0]) == HALF else "ρ_N(1, δ)²"
        return f"each time N = {rule(wall[0])}, the least N the pair bound {bound} predicts"
    return f"N = {rule(wall[0])} is NOT the least such N at " + ", ".join(
        f"m = {p['m']} (predicted {p['predicted_length']}, found {p['length']})" for p in off
    )


def _ratio_text(wall: list[dict]) -> str:
    ours = ", ".join(f"{p['log2_rank_per_m']:.2f} (m = {p['m']})" for p in wall)
    lo, hi = wall[0]["log2_layer_per_m"], wall[-1]["log2_layer_per_m"]
    layer = f"{lo:.2f}" if len(wall) == 1 else f"{lo:.2f} to {hi:.2f}"
    return (
        f"there log2 r / m is {ours}, against log2 C(m, m/2) / m = {layer} for the whole middle layer "
        f"and {PAPER['log2_rank_per_m']:g} for the 2^m features the paper says the bound approaches as N grows"
    )


def stays_at_n(curve: dict) -> bool:
    """Whether the certified rank of an N-curve, once it reaches n, stays at n to the last N listed."""
    full = curve["full_from"]
    return full is not None and all(p["certified"] == curve["n"] for p in curve["points"] if p["length"] >= full)


def _length_text(curves: list[dict]) -> str:
    parts = []
    for c in curves:
        last = c["points"][-1]
        share = f"{100 * last['certified'] / c['positive_construction']:.2g} % of 2^m"
        if stays_at_n(c):
            parts.append(
                f"m = {c['m']} stays at n = {c['n']:,} from N = {c['full_from']:,} to N = {last['length']:,} ({share})"
            )
        else:
            parts.append(
                f"m = {c['m']} reaches {last['certified']:,} of n = {c['n']:,} by N = {last['length']:,} ({share})"
            )
    flat = all(stays_at_n(c) for c in curves)
    head = "at fixed m the certified rank stops at the code size" if flat else "at fixed m"
    return f"{head}: " + ", ".join(parts)


def _constructed_text(wall: list[dict]) -> str | None:
    known = [p for p in wall if p["proved_equals_constructed"] is not None]
    if not known:
        return "no constructed rank was recorded, so proved = constructed is not checked"
    same = [p["m"] for p in known if p["proved_equals_constructed"]]
    differ = [p for p in known if not p["proved_equals_constructed"]]
    text = f"proved = constructed at {len(same)} of {len(wall)} m" + (
        f" (m = {', '.join(map(str, same))})" if same else ""
    )
    if differ:
        text += "; they differ at " + ", ".join(
            f"m = {p['m']} (certified {p['certified']:,}, constructed {p['constructed_rank']})" for p in differ
        )
    return text


def _delta_parts(delta: str, wall: list[dict], curves: list[dict]) -> list[str]:
    """One tolerance's sentences: its wall per m, log2 r / m, its N-curves, proved = constructed."""
    first = (wall or curves)[0]
    parts = [f"at δ = {delta}, {code_words(first)}"]
    if wall:
        parts[0] += ": " + "; ".join(wall_text(p) for p in wall) + f" ({_guess_text(wall)})"
        parts.append(_ratio_text(wall))
    if curves:
        parts.append(_length_text(curves))
    if wall:
        parts.append(_constructed_text(wall))
    return parts


def closest(wall: list[dict]) -> dict | None:
    """The row of a tolerance that gets closest to 2^m: its largest m whose whole code is certified."""
    full = [p for p in wall if p["length"] is not None and p.get("ratio_to_positive") is not None]
    return max(full, key=lambda p: p["m"]) if full else None


def closeness_text(delta: str, p: dict) -> str:
    """How close to 2^m one tolerance gets (``r/2^m`` and ``log2 r / m`` at its largest m)."""
    share = f"log2 r / m = {p['log2_rank_per_m']:.2f}, r/2^m = {p['ratio_to_positive']:.3g}"
    if p.get("distance") == 2 and p["certified"] == p["layer_size"]:
        return (
            f"at δ = {delta} the certificate covers the whole middle layer, C(m, m/2) = {p['certified']:,} at "
            f"m = {p['m']} from N = {p['length']:,} ({share})"
        )
    return f"at δ = {delta} the certificate gets to r = {p['certified']:,} at m = {p['m']} ({code_words(p)}; {share})"


def ceiling_text(delta: str, wall: list[dict]) -> str | None:
    """One tolerance against the ceiling of every pair certificate: where the run reaches it, or
    what share of it the code gets at the largest m."""
    known = [p for p in wall if p.get("ceiling") is not None]
    if not known:
        return None
    top = max(known, key=lambda p: p["m"])
    what = "C(m, ⌊m/2⌋)" if top["ceiling"] == top["layer_size"] else f"{top['ceiling']:,} at m = {top['m']}"
    gap, own = top["ceiling_gap"], top.get("distance", 4) // 2
    proven = f"proven at gap {gap}, so at gap {own} too" if gap < own else f"gap {gap}"
    bound = f"the ceiling of every pair certificate is {what} ({proven})"
    reached = [p["m"] for p in known if p["at_ceiling"]]
    if len(reached) == len(known):
        return f"at δ = {delta} {bound}, reached at every m run ({', '.join(map(str, reached))}): no pair certificate gets closer"
    share = f"{top['certified'] / top['ceiling']:.3g} of it at m = {top['m']}"
    return f"at δ = {delta} {bound}; the certificate reaches {share}" + (
        f" (all of it at m = {', '.join(map(str, reached))})" if reached else ""
    )


def limit_text(wall: list[dict]) -> str | None:
    """What "approaches 2^m" means exactly, at the largest m of the run: the exponent of
    ``C(m, m/2) = 2^m √(2/(πm))(1 + o(1))`` tends to 1, its ratio to 0; and what would have to
    change to go past the ceiling (when a tolerance reaches it everywhere)."""
    rows = [p for p in wall if p.get("layer_asymptote") is not None]
    if not rows:
        return None
    top = max(rows, key=lambda p: p["m"])
    text = (
        f"C(m, m/2) = 2^m √(2/(πm))(1 + o(1)) (at m = {top['m']}: C(m, m/2)/2^m = {top['layer_ratio']:.3g}, "
        f"√(2/(πm)) = {top['layer_asymptote']:.3g}, log2 C(m, m/2) / m = {top['log2_layer_per_m']:.2f}), so at "
        "that ceiling log2 r / m → 1 while r/2^m → 0 as m grows: the bound approaches 2^m in the exponent, "
        "not in the ratio"
    )
    capped = [d for d, rows in grouped(wall, delta_of).items() if rows and all(p.get("at_ceiling") for p in rows)]
    if capped:
        text += (
            f"; since at δ = {', '.join(capped)} the run already meets the ceiling, going further needs a "
            "certificate that is not pairwise (one that bounds more than two queries at a time)"
        )
    return text


def trained_text(t: dict) -> str:
    """One trained family: where its runs become exact models, against the certificate."""
    where = f"the layer family at m = {t.get('m')}, N = {t.get('length')}"
    cert = f"certified {t['certified_rank']:,}" if t["certified_rank"] is not None else "not certified yet"
    built = f", constructed {t['constructed_rank']:,}" if t["constructed_rank"] is not None else ""
    if not t["runs"]:
        return f"nothing is trained yet on {where} ({cert}{built})"
    maps = ", ".join(sorted({r["feature_map"] for r in t["runs"]}))
    top = max(r["rank"] for r in t["runs"])
    most = (
        f"exact on the whole family (most seeds) from rank {t['trained_most']}"
        if t["trained_most"] is not None
        else f"exact on the whole family for most seeds at no rank up to {top}"
    )
    text = f"{maps} kernels trained on {where} ({cert}{built}; {len(t['runs'])} runs): {most}"
    if t["trained_any"] is not None and t["trained_any"] != t["trained_most"]:
        text += f", some seed from rank {t['trained_any']}"
    if t["trained_most"] is not None and t["trained_most"] == t["certified_rank"]:
        text += "; trained = certified" + how_trained(t["runs"], t["trained_most"])
    if t["determined"]:
        by = "constructed" if t["constructed"] == t["certified"] else "trained"
        text += f"; the minimal rank is exactly {t['certified']:,} (certified = {by})"
    if t["exact_not_on_whole_family"]:
        text += f"; {t['exact_not_on_whole_family']} exact runs were not scored on the whole family and bound nothing"
    below = t["exact_below_certificate"]
    if below:
        text += "; a run is exact BELOW the certificate, which the theorem forbids: " + ", ".join(
            f"{b['feature_map']} r = {b['rank']} seed {b['seed']}" for b in below
        )
    elif t["certified_rank"] is not None:
        text += "; no run is exact below the certificate"
    return text


def how_trained(runs: list[dict], rank: int) -> str:
    """What the exact runs at ``rank`` took where some were cut from a wider table
    (``train.prune_from``) or needed fresh starts (``train.restarts``): " (2 of 2 exact seeds
    cut from rank 120; 1 of 2 after fresh starts, at most 3 tries)", else ""."""
    exact = [r for r in runs if r["rank"] == rank and r["exact"] and r["whole_family"]]
    parts = []
    pruned = [r for r in exact if r.get("pruned_from")]
    if pruned:
        wide = ", ".join(str(w) for w in sorted({r["pruned_from"] for r in pruned}))
        parts.append(f"{len(pruned)} of {len(exact)} exact seeds cut from rank {wide}")
    restarted = [r for r in exact if r.get("tries", 1) > 1]
    if restarted:
        most = max(r["tries"] for r in restarted)
        parts.append(f"{len(restarted)} of {len(exact)} exact seeds after fresh starts, at most {most} tries")
    return f" ({'; '.join(parts)})" if parts else ""


def how_close_parts(wall: list[dict]) -> list[str]:
    """Per tolerance how close to 2^m, against the ceiling; then the exact limit."""
    by = grouped(wall, delta_of)
    parts = [closeness_text(d, closest(rows)) for d, rows in by.items() if closest(rows)]
    parts += [t for t in (ceiling_text(d, rows) for d, rows in by.items()) if t]
    limit = limit_text(wall)
    return parts + ([limit] if limit else [])


def sentence(summary: dict) -> str | None:
    """Per tolerance its wall, N-curves and proved = constructed; then how close to 2^m each
    gets and what "approaches 2^m" means; the m skipped and the trained point."""
    s = summary["context"]
    walls, curves = grouped(s["wall"], delta_of), grouped(s["length_curves"], delta_of)
    parts = []
    for delta in dict.fromkeys([*walls, *curves]):
        parts += _delta_parts(delta, walls.get(delta, []), curves.get(delta, []))
    parts += how_close_parts(s["wall"])
    if s["skipped"]:
        parts.append("skipped: " + "; ".join(_skipped(k) for k in s["skipped"]))
    parts += [trained_text(t) for t in s["trained"]]
    if not parts:
        return None
    text = ". ".join(p[0].upper() + p[1:] for p in parts if p)
    return f"Layer codes: {text[0].lower() + text[1:]}."


def _skipped(k: dict) -> str:
    at = f", δ = {k['delta']}" if k.get("delta") not in (None, HALF) else ""
    return f"m = {k['m']}{at} ({k['why']})"


def paper_rows(summary: dict) -> list[dict]:
    """The row "bound → 2^m as N grows": per tolerance the wall, and as an exact statement what
    the run shows (the code size or the ceiling at fixed m; the exponent → 1, not the ratio)."""
    s = summary["context"]
    if not s["wall"]:
        return []
    walls = grouped(s["wall"], delta_of)
    curves = s["length_curves"]
    flat = bool(curves) and all(stays_at_n(c) for c in curves)
    note = ""
    if flat:
        codes = "; ".join(
            f"at δ = {d} {code_words(rows[0])}, reached from N = {rule(rows[0])}" for d, rows in walls.items()
        )
        note = f"At fixed m the certificate stops at the code size n ({codes}); longer contexts add nothing. "
    half = walls.get(HALF)
    if half:
        note += (
            f"At δ = 1/2 log2 r / m grows with m ({half[0]['log2_rank_per_m']:.2f} at m = {half[0]['m']}, "
            f"{half[-1]['log2_rank_per_m']:.2f} at m = {half[-1]['m']}), below the middle layer's "
            f"{half[-1]['log2_layer_per_m']:.2f} at m = {half[-1]['m']}. "
        )
    note += " ".join(p[0].upper() + p[1:] + "." for p in how_close_parts(s["wall"]))
    ours = "; ".join(
        f"δ = {d}: " + ", ".join(f"m = {p['m']}: r = {p['certified']:,} from N = {fmt(p['length'])}" for p in rows)
        for d, rows in walls.items()
    )
    return [
        {
            "quantity": "The wall in context length: certified rank as N grows",
            "paper": f"{PAPER['claim']} (log2 r / m → {PAPER['log2_rank_per_m']:g})",
            "ours": ours,
            "note": note.strip(),
        }
    ]


def _key(kind: str, row: dict) -> str:
    """``wall m = 12`` at δ = 1/2 (as before δ was recorded), ``wall δ = 2/5, m = 12`` otherwise."""
    delta = delta_of(row)
    return f"{kind} m = {row['m']}" if delta == HALF else f"{kind} δ = {delta}, m = {row['m']}"


def conclusions(summary: dict) -> dict[str, str]:
    """Per (δ, m) of the wall, per N-curve and per trained family what it shows; the m skipped."""
    s = summary["context"]
    out = {}
    for p in s["wall"]:
        at = _key("wall", p)
        out[f"{at}: all {p['n']:,} code words certified from N"] = fmt(p["length"]) if p["length"] else "never"
        out[f"{at}: certified rank"] = f"{p['certified']:,}"
        out[f"{at}: certified one N shorter"] = (
            f"{p['certified_below']:,} at N = {p['below_length']}" if p["below_length"] is not None else "–"
        )
        out[f"{at}: N = {rule(p)} is the least such N"] = yes_no(p["formula_holds"])
        out[f"{at}: proved = constructed"] = yes_no(p["proved_equals_constructed"])
        if p.get("ratio_to_positive") is not None:
            out[f"{at}: r/2^m"] = f"{p['ratio_to_positive']:.4g}"
            out[f"{at}: log2 r / m"] = f"{p['log2_rank_per_m']:.3f}"
            out[f"{at}: at the pair certificates' ceiling"] = yes_no(p.get("at_ceiling"))
    for c in s["length_curves"]:
        at = _key("N-curve", c)
        out[f"{at}: all {c['n']:,} certified from N"] = fmt(c["full_from"]) if c["full_from"] else "never"
        out[f"{at}: stays at n to the last N"] = yes_no(stays_at_n(c))
    if s["skipped"]:
        out["m skipped"] = ", ".join(str(k["m"]) for k in s["skipped"])
    for t in s["trained"]:
        out.update(trained_conclusions(t, f"layer m = {t.get('m')}, N = {t.get('length')}"))
    return out
