"""The paper's reported numbers beside ours, with a sentence per row computed from the numbers."""

from __future__ import annotations

from .common import fmt

#: What the paper reports.  Kept verbatim in summary.json.
PAPER = {
    "witness": {"inputs": 1272, "m": 24, "certified_rank": 8,
                "error_below_bound": "> 0.80 for r < 8", "exact_rank": 32},
    "ood": {"transition_ranks": [8, 16, 64]},
    "softmax_exact_all_seeds": True,
    "length": {"rank1_exact_up_to_N": 2, "rank1_exact_at_N3": False},
}


def witness_rows(s: dict) -> list[dict]:
    w = s["witness"]
    cert = w.get("certified_rank")
    certificate = w.get("certificate") or {}
    bounds = certificate.get("bounds") or {}
    built = w.get("constructed") or {}
    min_below = w.get("below_certificate_min_error")
    exact_rank = w.get("transition_rank") or {}
    trained = [v for v in exact_rank.values() if v is not None]
    rows = [
        {"quantity": "Witness family: certified rank bound",
         "paper": f"r ≥ {PAPER['witness']['certified_rank']} ({PAPER['witness']['inputs']} inputs)",
         "ours": f"r ≥ {cert} ({w['sequences']} sequences, m = {w['m']})",
         "note": "The paper's witness suite is not published; ours is 16 Hadamard-24 codewords with "
                 "their complements as good candidates and every other query's good candidate as a bad "
                 f"one. Radon bound {fmt((bounds.get('radon') or {}).get('rank'))} (every pair of queries has "
                 f"ε_ij·ε_ji ≤ {(bounds.get('radon') or {}).get('max_product', '?')}); trace bound "
                 f"{fmt((bounds.get('trace') or {}).get('rank'))} (Σε² = {certificate.get('sum_eps2', '?')}); "
                 "both in exact rationals."},
        {"quantity": "Witness: smallest max error below the bound",
         "paper": PAPER["witness"]["error_below_bound"],
         "ours": fmt(min_below),
         "note": ("Agrees: every run below the certified rank keeps max error ≥ 1/2, as the theorem "
                  "demands." if min_below is None or min_below >= 0.5 else
                  "A run below the certified rank is exact: that contradicts the theorem and is a bug.")},
        {"quantity": "Witness: rank where training becomes exact",
         "paper": f"r = {PAPER['witness']['exact_rank']}",
         "ours": ", ".join(f"{k}: r = {fmt(v)}" for k, v in sorted(exact_rank.items())) or "–",
         "note": _witness_agreement(cert, built, trained)},
    ]
    sm = w.get("softmax") or []
    if sm:
        ok = sum(1 for r in sm if r["exact"])
        rows.append({"quantity": "Witness: dense softmax exact on all seeds",
                     "paper": "yes", "ours": f"{ok}/{len(sm)} seeds",
                     "note": "Agrees." if ok == len(sm) else "Some softmax seeds failed to fit: see the runs table."})
    return rows


def _witness_agreement(cert, built: dict, trained: list[int]) -> str:
    """Whether proved, constructed and trained exact ranks coincide (computed, never assumed)."""
    parts = [f"certified r ≥ {cert}"]
    if built:
        parts.append(f"the one-hot construction is {'exact' if built.get('exact') else 'NOT exact'} "
                     f"at r = {built.get('rank')} on all {built.get('sequences')} sequences "
                     f"(max error {fmt(built.get('max_error'), '.2g')})")
    if trained:
        parts.append(f"training is first exact (most seeds) at r = {min(trained)}")
    same = built.get("exact") and cert == built.get("rank") and trained and min(trained) == cert
    return ("; ".join(parts) + ". " + ("Proved = constructed = trained." if same else
            "They do not all coincide; see the witness runs."))


def _transition(scale: dict) -> str:
    """The transition rank, or how far the grid went without reaching it."""
    if scale.get("transition_rank") is not None:
        return f"r = {scale['transition_rank']}"
    top = max((r["rank"] for r in scale.get("runs", [])), default=None)
    return f"not reached up to r = {top}"


def ood_rows(s: dict) -> list[dict]:
    scales = (s.get("ood") or {}).get("scales") or []
    if not scales:
        return []
    ours = [sc.get("transition_rank") for sc in scales]
    monotone = all(a is None or b is None or b >= a for a, b in zip(ours, ours[1:]))
    softmax = [r for sc in scales for r in sc.get("softmax", [])]
    sm_all = len(softmax)
    sm_train = sum(1 for r in softmax if r["train_exact"])
    sm_solved = sum(1 for r in softmax if r["solved"])
    sm_ok = sum(1 for r in softmax if r["exact"])
    return [
        {"quantity": "OOD: transition rank per size (majority of seeds with test exact-sequence accuracy ≥ 0.95)",
         "paper": " → ".join(map(str, PAPER["ood"]["transition_ranks"])),
         "ours": " → ".join(f"{sc['label']}: {_transition(sc)}" for sc in scales),
         "note": ("The transition moves up with the problem size, as in the paper." if monotone else
                  "The transition does not grow monotonically here; see the OOD figure.")
                 + " The paper gives no construction for its pools; ours are Hadamard classes with "
                   "nuisance bits (every test token unseen), so absolute ranks differ."},
        {"quantity": "OOD: dense softmax exact on every size and seed",
         "paper": "yes",
         "ours": f"train exact {sm_train}/{sm_all}; unseen test pool solved {sm_solved}/{sm_all}, "
                 f"test max error < 1/2 {sm_ok}/{sm_all}",
         "note": ("Agrees, also on the unseen tokens' max error." if sm_ok == sm_all else
                  "Agrees on the training families and on test accuracy; on unseen tokens the MLP "
                  "readout leaves a max error above 1/2 on a few sequences, "
                  "so the strict reading is not met on every seed." if sm_train == sm_solved == sm_all
                  else "Not on every seed: see the OOD runs.")},
    ]


def length_rows(s: dict) -> list[dict]:
    rows = s.get("length") or []
    if not rows:
        return []

    def exact(n, source):
        hits = [r["exact"] for r in rows if r["N"] == n and r.get("source") == source]
        return all(hits) if hits else None

    parts = []
    for source in ("constructed", "trained"):
        cells = [f"N={n}: {'exact' if exact(n, source) else 'not exact'}" for n in (1, 2, 3)
                 if exact(n, source) is not None]
        if cells:
            parts.append(f"{source}: " + ", ".join(cells))
    agree = exact(1, "constructed") and exact(2, "constructed") and exact(3, "constructed") is False
    return [{"quantity": "Length: rank 1 exact for N ≤ 2, not N = 3",
             "paper": "N ≤ 2 exact, N = 3 not", "ours": "; ".join(parts),
             "note": "Agrees." if agree else "Differs: see the length figure."}]


def comparison_rows(summary: dict) -> list[dict]:
    return witness_rows(summary) + ood_rows(summary) + length_rows(summary)
