"""The theory's results as text lines (what ``kernelgap certify``, ``bound-curve`` and ``bound
transcript`` print): each function reads the JSON payload of one result and returns its
lines, so a payload read back from a file renders the same."""

from __future__ import annotations

from ..task.family import count_text

# -- a certificate (certify.Certificate.to_json, with construction.constructed's fields) --


def describe_certificate(payload: dict) -> list[str]:
    """Human lines for :meth:`~.certificate.Certificate.to_json`: both bounds, which one wins and why."""
    return [
        *_family_lines(payload),
        _trace_line(payload),
        _radon_line(payload),
        *_chromatic_lines(payload),
        *_verdict_lines(payload),
        *_problem_lines(payload),
    ]


def _family_lines(payload: dict) -> list[str]:
    count = count_text(payload["sequences"])
    compared = (
        f"{payload['comparisons']:,} comparisons"
        if payload.get("comparisons") is not None
        else f"at least {payload.get('comparisons_at_least') or 0:,} comparisons (not counted one by one)"
    )
    lines = [
        f"family {payload['family']}: {count} sequences of length {payload.get('length', 3)}, m = {payload['m']}, "
        f"query at position {payload['query_position']}, δ = {payload['delta']}, {compared}",
    ]
    sub = payload.get("subfamily")
    if sub:
        lines.append(
            f"sub-family: the first {sub['queries']:,} of the {sub['of']:,} queries, their good candidates the "
            f"only candidates, certified with the pair matrices (a model exact on the family is exact on it)"
        )
    return lines


def _trace_line(payload: dict) -> str:
    trace, sub = payload["bounds"]["trace"], payload.get("subfamily")
    if trace.get("skipped"):
        return f"trace bound: skipped ({trace['skipped']})"
    rel = ">" if payload["strict"] else "≥"
    return (
        f"trace bound{' (sub-family)' if sub else ''}: {trace['queries']} of "
        f"{sub['queries'] if sub else payload['queries_total']} queries, Σε² = {trace['sum_eps2']}, "
        f"n²/(n + Σε²) = {trace['bound']} (≈ {payload['bound_float']:.4f}), so r {rel} that: r ≥ {trace['rank']}"
    )


def _radon_line(payload: dict) -> str:
    radon, rule = payload["bounds"]["radon"], payload.get("rule")
    members = radon.get("count", len(radon.get("queries") or []))
    product = radon.get("max_product")
    if radon.get("by_rule") and rule:
        exact = "" if rule["min_distance_exact"] else "at least "
        which = f"all {members:,}" if radon.get("members") == "all" else f"the first {members:,}"
        return (
            f"Radon bound by rule: the query code's least distance is {exact}{rule['min_distance']}, so every pair "
            f"has gap ≥ {rule['least_gap']}, ε ≤ ρ_N = {rule['eps']} and ε_ij·ε_ji ≤ {rule['product']} "
            f"(≤ 1/{radon['level']}): {which} queries, r ≥ {radon['rank']} (no pair matrix, no clique search)"
        )
    if product is None and radon.get("max_product_bound") is None:
        return "Radon bound: no pair of queries qualifies, r ≥ 1"
    search = (
        "every pair of all the queries qualifies: no clique search"
        if radon.get("whole_set") and radon.get("members") == "all"
        else "every pair of all the matching entries qualifies: no clique search"
        if radon.get("whole_set")
        else "exact search"
        if radon["exact_search"]
        else "budget ran out: greedy, may be improvable"
    )
    shown = product if product is not None else f"{radon['max_product_bound']} (a bound)"
    return (
        f"Radon bound: {members} queries whose every pair has ε_ij·ε_ji ≤ "
        f"{shown} (≤ 1/{radon['level']}), so r ≥ {radon['rank']} ({search})"
    )


def _chromatic_lines(payload: dict) -> list[str]:
    chrom = payload["bounds"].get("chromatic")
    if not chrom or not chrom["rank"]:
        return []
    how = {"independence": "n/α", "fractional": "the fractional chromatic number (exact LP dual)"}
    return [
        f"chromatic bound: the {len(chrom['queries'])} queries whose pairs have ε_ij·ε_ji ≤ 1/{chrom['level']}² "
        f"need {chrom['level'] + 1} colours ({how.get(chrom['method'], 'a refuted colouring, confirmed by a second solver')}), "
        f"so r ≥ {chrom['rank']}"
    ]


def _verdict_lines(payload: dict) -> list[str]:
    rule, lines = payload.get("rule"), []
    if rule and not payload["bounds"]["radon"].get("by_rule"):
        lines.append(
            f"the least-gap rule gave r ≥ {rule['rank']:,} (least distance {rule['min_distance']}): "
            f"the pair matrices did better"
        )
    why = {
        "radon": "it uses that the features are nonnegative",
        "chromatic": "no colouring of the bounded pairs by that few colours, past every pair clique",
    }.get(payload["method"], "ε is uneven enough that the sum of squares wins")
    lines.append(
        f"certified: every exact nonnegative kernel model needs r ≥ {payload['certified_rank']} "
        f"({payload['method']} bound: {why})"
    )
    return lines


def _problem_lines(payload: dict) -> list[str]:
    lines = []
    if payload["weakest_pair"]:
        w = payload["weakest_pair"]
        lines.append(f"weakest pair: ε = {w['eps']} (s_good = {w['s_good']}, s_bad = {w['s_bad']})")
    if payload["unbounded_count"]:
        lines.append(f"{payload['unbounded_count']} pairs could not be bounded, e.g.:")
        lines += [f"  query {p['query']} vs bad {p['bad']}: {p['reason']}" for p in payload["unbounded_pairs"][:5]]
    if payload["dropped_count"]:
        lines.append(f"{payload['dropped_count']} queries dropped to keep the trace bound sound")
    return lines


def describe_construction(payload: dict) -> list[str]:
    """The human lines for a certificate payload's construction fields (:mod:`.construction`):
    the one-head constructions, then the two-head one (:mod:`.two_heads`)."""
    return [_one_head_line(payload), _two_heads_line(payload)]


def _two_heads_line(payload: dict) -> str:
    two = payload["two_heads"]
    if not two["applies"]:
        return f"two heads: no construction ({two['reason']})"
    verdict = "exact" if two["exact"] else "NOT exact"
    return (
        f"one head: certified r ≥ {payload['certified_rank']}; two heads: constructed total {two['total']} "
        f"(ranks {two['heads'][0]} + {two['heads'][1]}), {verdict} on all {two['sequences']:,} sequences "
        f"(max error {two['max_error']} in exact arithmetic)"
    )


def _one_head_line(payload: dict) -> str:
    best = payload.get("construction")
    if best is None:
        return "constructed: neither one-hot construction checks exact on this family"
    levels = {
        "family": "over the levels each query sees",
        "all": "over every level 0..|x| (an upper bound: every input of this length)",
        "every sequence": "on every sequence",
    }[best["levels"]]
    same = "= certified: proved equals constructed" if payload["proved_equals_constructed"] else "(above the certified)"
    return (
        f"constructed: {best['construction'].replace('_one_hot', ' one-hot')} of rank {best['rank']} {same}; its max error "
        f"{best['error_bound']:.3g} < 1/2 {levels} (margin {best['margin']:.4f})"
    )


# -- bound curves (the series of .bound_curve and .layer_curve) ------------------------


def code_curve_lines(payload: dict) -> list[str]:
    """A code series' curve (hadamard, cw): per m the direct and chained certificates."""
    columns = [
        ("m", 4, lambda p: p["m"]),
        ("n", 5, lambda p: p["queries"]),
        ("direct", 7, lambda p: p["certified_direct"]),
        ("chained", 8, lambda p: p["certified_chained"]),
        ("trace", 6, lambda p: p["trace_chained"]),
        ("softmax d", 10, lambda p: p["softmax_score_dim"]),
        ("2^m", 22, lambda p: p["positive_construction"]),
    ]
    return _table(columns, payload["points"]) + skipped_lines(payload)


def ladder_curve_lines(payload: dict) -> list[str]:
    """The ladder series' curve: per m the largest family certified in full, and the growth fit."""
    columns = [
        ("m", 4, lambda p: p["m"]),
        ("queries n", 10, lambda p: p["queries"]),
        ("certified", 10, lambda p: p["certified"]),
        ("trace", 7, lambda p: p["trace"]),
        ("softmax max err", 16, lambda p: f"{p['softmax']['max_error']:.3f}"),
        ("2^m", 22, lambda p: p["positive_construction"]),
    ]
    lines = _table(columns, payload["points"])
    if payload.get("growth"):
        g = payload["growth"]
        lines.append(
            f"growth: log2(certified) ≈ {g['log2_per_m']:.4f}·m {g['intercept']:+.3f} "
            f"(least squares over {g['points']} points); dense softmax's construction was "
            f"exact on every sampled sequence: "
            f"{all(p['softmax']['exact'] for p in payload['points'])}"
        )
    return lines + skipped_lines(payload)


def _table(columns: list[tuple], points: list[dict]) -> list[str]:
    """A header and one row per point, each column ``(title, width, cell)`` right-aligned."""
    lines = [" ".join(f"{title:>{width}}" for title, width, _ in columns)]
    lines += [" ".join(f"{cell(p):>{width}}" for _, width, cell in columns) for p in points]
    return lines


def skipped_lines(payload: dict) -> list[str]:
    """The m of a curve against m that have no family of its series."""
    if not payload.get("skipped_m"):
        return []
    return [f"no {payload['code']} family at m = {', '.join(map(str, payload['skipped_m']))}"]


def layer_lines(payload: dict) -> list[str]:
    """The layer curves as text lines (``kernelgap bound-curve --code layer``), per δ."""
    if payload["against"] == "length":
        return [line for c in payload["curves"] for line in _length_curve_lines(c)]
    groups: dict[str, list[dict]] = {}
    for p in payload["points"]:
        groups.setdefault(p.get("delta") or "1/2", []).append(p)
    return [line for rows in groups.values() for line in _wall_lines(rows)]


def _code_words(row: dict) -> str:
    what = "the whole weight-m/2 layer" if row.get("distance") == 2 else "the largest Graham–Sloane class"
    return f"δ = {row.get('delta') or '1/2'}, {what}"


def _length_curve_lines(c: dict) -> list[str]:
    lines = [
        f"m = {c['m']}, {_code_words(c)}: n = {c['n']:,} code words, C(m, m/2) = {c['layer_size']:,}, "
        f"2^m = {c['positive_construction']:,}",
        f"{'N':>6} {'certified':>10} {'trace':>8} {'radon':>8}  method",
    ]
    lines += [
        f"{p['length']:>6} {p['certified']:>10,} {p['trace']:>8,} {p['radon']:>8,}  {p['method']}" for p in c["points"]
    ]
    rule = c.get("length_rule") or "2 + ⌈√(n − 1)⌉"
    if c["full_from"] is None:
        lines.append(f"no N listed certifies all {c['n']:,} words ({rule} = {c['wall_guess']:,})")
    else:
        short = c["last_short"]
        lines.append(
            f"all {c['n']:,} words certified from N = {c['full_from']:,}"
            + (f" ({short['certified']:,} at N = {short['length']:,})" if short else "")
        )
    return lines


def _wall_lines(points: list[dict]) -> list[str]:
    """One δ's wall: per m the smallest full N, the rank, its share of 2^m and the ceiling."""
    lines = [
        _code_words(points[0]) + ":",
        f"{'m':>4} {'n':>10} {'N*':>6} {'certified':>10} {'at N*-1':>10} {'constructed':>12} {'log2 r/m':>9} "
        f"{'r/2^m':>9} {'ceiling':>11} {'C(m,m/2)':>14} {'2^m':>16}",
    ]
    for p in points:
        at = str(p["length"]) if p["length"] is not None else "-"
        below = f"{p['certified_below']:,}" if p["certified_below"] is not None else "-"
        built = f"{p['constructed_rank']:,}" if p["constructed_rank"] is not None else "-"
        ceiling = f"{p['ceiling']:,}" if p.get("ceiling") is not None else "-"
        lines.append(
            f"{p['m']:>4} {p['n']:>10,} {at:>6} {p['certified']:>10,} {below:>10} {built:>12} "
            f"{p['log2_rank_per_m']:>9.3f} {p.get('ratio_to_positive', 0):>9.3g} {ceiling:>11} "
            f"{p['layer_size']:>14,} {p['positive_construction']:>16,}"
        )
    rule = points[0].get("length_rule") or "2 + ⌈√(n − 1)⌉"
    off = [p for p in points if not p["formula_holds"]]
    lines.append(
        f"N* = {rule} is the smallest N certifying all n words at every m (checked at N* and N* − 1)"
        if not off
        else f"N* = {rule} is NOT the smallest N at m = "
        + ", ".join(f"{p['m']} (guess {p['predicted_length']}, found {p['length']})" for p in off)
    )
    at_ceiling = [p["m"] for p in points if p.get("at_ceiling")]
    if at_ceiling:
        lines.append(
            "the certificate reaches the proven ceiling of every pair certificate (column ceiling) at m = "
            + ", ".join(map(str, at_ceiling))
        )
    return lines


# -- the transcript bound (.transcript) --------------------------------------------------


def transcript_lines(payload: dict) -> list[str]:
    """The bits the answers need and, with a sketch, whether it can carry them."""
    lines = [
        f"{payload['answers']} answers × log2({payload['values']}) = "
        f"{payload['bits_needed']:.4g} bits (at least {payload['bits_needed_ceil']} whole bits)"
    ]
    if "capacity_bits" in payload:
        verdict = "can" if payload["can_carry"] else "cannot"
        lines.append(
            f"sketch: {payload['features']} features × {payload['value_dim']} value dim × "
            f"{payload['heads']} heads × {payload['bits']} bits = {payload['capacity_bits']} bits: "
            f"it {verdict} carry the answers"
        )
    return lines
