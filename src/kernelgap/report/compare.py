"""The paper's reported numbers beside ours, with a sentence per row (issue #5)."""

from __future__ import annotations

from .common import fmt

#: What the paper reports (SPEC §6; seed text).  Kept verbatim in summary.json.
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
    min_below = w.get("below_certificate_min_error")
    exact_rank = w.get("transition_rank") or {}
    rows = [
        {"quantity": "Witness family: certified rank bound",
         "paper": f"r ≥ {PAPER['witness']['certified_rank']} ({PAPER['witness']['inputs']} inputs)",
         "ours": f"r ≥ {cert} ({w['sequences']} sequences, m = {w['m']})",
         "note": "The paper's witness suite is not published; ours is the SPEC §7 family (16 "
                 "Hadamard-24 codewords, complements as good candidates, every other query's good "
                 f"candidate as a bad one); its exact-rational certificate has Σε² = "
                 f"{(w.get('certificate') or {}).get('sum_eps2', '?')} and bound "
                 f"{(w.get('certificate') or {}).get('bound', '?')}."},
        {"quantity": "Witness: smallest max error below the bound",
         "paper": PAPER["witness"]["error_below_bound"],
         "ours": fmt(min_below),
         "note": ("Agrees: every run below the certified rank keeps max error ≥ 1/2, as the theorem "
                  "demands." if min_below is None or min_below >= 0.5 else
                  "A run below the certified rank is exact: that contradicts the theorem and is a bug.")},
        {"quantity": "Witness: rank where training becomes exact",
         "paper": f"r = {PAPER['witness']['exact_rank']}",
         "ours": ", ".join(f"{k}: r = {fmt(v)}" for k, v in sorted(exact_rank.items())) or "–",
         "note": "The sharp transition sits at the number of queries n = 16 (the B matrix needs "
                 "numerical rank n), above the certificate: the trace bound is not tight."},
    ]
    sm = w.get("softmax") or []
    if sm:
        ok = sum(1 for r in sm if r["exact"])
        rows.append({"quantity": "Witness: dense softmax exact on all seeds",
                     "paper": "yes", "ours": f"{ok}/{len(sm)} seeds",
                     "note": "Agrees." if ok == len(sm) else "Some softmax seeds failed to fit: see the runs table."})
    return rows


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
                  "readout leaves a max error above 1/2 on a few sequences (SPEC §7 saw 0.62–0.79), "
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
