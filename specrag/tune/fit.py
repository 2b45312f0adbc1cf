"""Fit a collection's acceptance model and router on the tune's rows; replay held out.

``fit(rows, questions, verifier, ...)`` splits by ``questions.held_out`` (by source
chunk), then on the training side

1. **calibrate**: verifies every draft again (grounding alone plus the signals of "does it
   answer the question", as ``calibrate --e2e`` does) and fits an ``AcceptanceModel``
   and its bar ``verify.answer_threshold``: the most drafts accepted at the target
   precision, label *right (``right``: contains the answer or token F1 >= 0.5) and its
   passage retrieved*;
2. **router**: fits a ``RouterModel`` on the rows' recorded router inputs, label
   *accepted under the tuned acceptance and right*, bar = median draft time / median
   heavy-only time (drafting pays when P(draft will do) x heavy > draft).

Each block of the report is the held-out split replayed from the recorded generations
(``e2e_report.replay``: nothing is regenerated): ``before`` (the verdicts served at
collection time), ``calibrate``, ``router`` (routed over the tuned acceptance), with
``acceptance_rate``, ``accepted_precision``, ``correct``, ``total_p50_ms`` and
``heavy_tokens``. A step's settings are kept only if its block is no less correct than
``before`` and faster or cheaper: a tune never makes a collection worse on its own
held-out questions.

Deliberately not here: generation (``tune.collect``) and writing settings (``tune.run``).
"""

from __future__ import annotations

import numpy as np

from specrag.bench import e2e_report
from specrag.bench.metrics import containment, percentile, token_f1
from specrag.grounding.acceptance import AcceptanceModel
from specrag.routing.router import RouterModel
from specrag.tune.questions import held_out
from specrag.types import SpecragError


def choose(grounded, p_right, labels, target: float, min_accepted: int = 8,
           grounding: float | None = None) -> dict:
    """The (grounding, P(right)) thresholds accepting the most rows at >= ``target``
    precision; the most precise pair when the target is out of reach. ``grounding``
    fixes the first (the pair-calibrated ``verify.threshold``)."""
    g, p, y = (np.asarray(a, float) for a in (grounded, p_right, labels))
    best, fallback = None, None
    grid = [grounding] if grounding is not None else np.unique(np.concatenate([[0.0], g]))
    for tg in grid:
        for ta in np.unique(np.concatenate([[0.0], p])):
            acc = (g >= tg) & (p >= ta)
            n = int(acc.sum())
            if n < min_accepted:
                continue
            prec = float(y[acc].mean())
            row = {"threshold": float(tg), "answer_threshold": float(ta), "accepted": n,
                   "precision": prec}
            if prec >= target and (best is None or n > best["accepted"]):
                best = row
            if fallback is None or (prec, n) > (fallback["precision"], fallback["accepted"]):
                fallback = row
    if best is None and fallback is None:
        raise SpecragError("too few dev drafts to calibrate on")
    return {**(best or fallback), "target_met": best is not None}


def right(text: str | None, answers) -> float:
    """Contains the question's answer, or (a writer's answer is often a sentence) shares
    at least half its words (token F1 >= 0.5)."""
    if not text:
        return 0.0
    return float(containment(text, answers) >= 1.0 or token_f1(text, answers) >= 0.5)


def scored(rows: list[dict]) -> list[dict]:
    """Rows whose ``scores[contains]`` (what the replay counts as correct) is ``right``."""
    out = []
    for r in rows:
        ok = right(r.get("prediction"), r["answers"])
        out.append({**r, "scores": {**(r.get("scores") or {}), e2e_report.CORRECT: ok},
                    "draft_right": right(r.get("draft"), r["answers"])})
    return out


def label(row: dict) -> float:
    """Right and grounded: the draft is right and the question's passage was retrieved."""
    return float(row["draft_right"] and row.get("gold_retrieved", True))


BLOCK_KEYS = ("acceptance_rate", "accepted_precision", "correct", "total_p50_ms", "heavy_tokens")


def block(by: dict[str, list[dict]], drafted: set | None = None) -> dict:
    r = e2e_report.replay(by, None, drafted)
    return {"acceptance_rate": r["acceptance_rate"], "accepted_precision": r["accepted_precision"],
            "correct": r["accuracy"], "total_p50_ms": r["total_p50_ms"],
            "heavy_tokens": r["heavy_tokens"], "questions": r["questions"]}


def better(after: dict, before: dict) -> bool:
    """No less correct, and faster or cheaper."""
    if after["correct"] is None or before["correct"] is None:
        return False
    return after["correct"] >= before["correct"] - 1e-9 and (
        (after["total_p50_ms"] or 0) < (before["total_p50_ms"] or 0)
        or after["heavy_tokens"] < before["heavy_tokens"])


def _split(rows, held: set[str]):
    by = {"train": {}, "held_out": {}}
    for r in rows:
        side = "held_out" if r["id"] in held else "train"
        by[side].setdefault(r["policy"], []).append(r)
    return by


def verdict_features(rows: list[dict], verifier) -> dict[str, tuple]:
    """Per draft row id: (grounding, signals, abstained), scored by ``verifier``."""
    out = {}
    for r in rows:
        if r["policy"] == "draft-only" and r.get("draft") and r.get("verify_chunks"):
            v = verifier.verify(r["draft"], r["verify_chunks"])
            sig = verifier.signals(r["question"], r["draft"], r["verify_chunks"], v.sentences)
            out[r["id"]] = (v.grounding, sig, v.abstained)
    return out


def calibrate(by_train: dict, feats: dict, target: float) -> dict | None:
    """The fitted model and bar, or None when the training side is too small to fit."""
    drafts = [r for r in by_train.get("draft-only", []) if r["id"] in feats
              and not feats[r["id"]][2]]
    y = np.array([label(r) for r in drafts])
    if len(drafts) < 6 or y.min() == y.max():
        return None
    model = AcceptanceModel.fit([feats[r["id"]][0] for r in drafts],
                                [feats[r["id"]][1] for r in drafts], y, fitted_on="specrag tune")
    g = np.array([feats[r["id"]][0] for r in drafts])
    p = np.array([model.combine(feats[r["id"]][0], model.relevance(feats[r["id"]][1]))
                  for r in drafts])
    chosen = choose(g, p, y, target, min_accepted=max(2, len(drafts) // 10), grounding=0.0)
    return {"model": model, **chosen}


def accepted_under(by: dict, feats: dict, model, bar: float) -> dict:
    """The same rows with each draft's ``accepted`` decided by ``model`` at ``bar``."""
    out = dict(by)
    drafts = []
    for r in by.get("draft-only", []):
        f = feats.get(r["id"])
        ok = bool(f) and not f[2] and model.combine(f[0], model.relevance(f[1])) >= bar
        drafts.append({**r, "accepted": ok})
    out["draft-only"] = drafts
    return out


def draft_heavy_ratio(by: dict) -> float:
    d = [r["timings_ms"].get("total", 0) for r in by.get("draft-only", [])]
    h = [r["timings_ms"].get("total", 0) for r in by.get("heavy-only", [])]
    return round(percentile(d, 50) / percentile(h, 50), 2) if d and h and percentile(h, 50) else 0.35


def router(by_train: dict, by_held: dict, tuned_train: dict, tuned_held: dict) -> dict | None:
    rows = [r for r in tuned_train.get("draft-only", []) if r.get("route_features")]
    y = [float(r["accepted"] and label(r)) for r in rows]
    if len(rows) < 6 or min(y) == max(y):
        return None
    threshold = draft_heavy_ratio(by_train)
    model = RouterModel.fit([r["route_features"] for r in rows], y, threshold=threshold,
                            fitted_on="specrag tune")
    p = {r["id"]: model.predict(r["route_features"])
         for r in tuned_held.get("draft-only", []) if r.get("route_features")}
    drafted = {i for i, q in p.items() if q >= threshold}
    return {"model": model, "threshold": threshold, "block": block(tuned_held, drafted),
            "draft_share": len(drafted) / max(1, len(p))}


def replay_held(rows: list[dict], verifier, model=None, bar: float | None = None) -> dict:
    """The block for held-out ``rows`` (e.g. drafts of a distilled model): their served
    verdicts, or ``model`` at ``bar`` when the collection runs a tuned acceptance."""
    rows = scored(rows)
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["policy"], []).append(r)
    if model is not None:
        by = accepted_under(by, verdict_features(rows, verifier), model, bar)
    return block(by)


def acceptance_at(rows: list[dict], precision: float) -> float | None:
    """The most drafts of ``rows`` (draft-only, scored) a bar on their recorded P(right)
    accepts with at least ``precision`` of them right: drafts compared at one precision."""
    drafts = [(r.get("verdict_score") or 0.0, r["draft_right"]) for r in rows
              if r["policy"] == "draft-only" and r.get("draft") and not r.get("abstained")]
    n = sum(1 for r in rows if r["policy"] == "draft-only")
    if precision is None or not n:
        return None
    best = 0.0
    for bar in {p for p, _ in drafts}:
        took = [ok for p, ok in drafts if p >= bar]
        if took and sum(took) / len(took) >= precision - 1e-9:
            best = max(best, len(took) / n)
    return best


def fit(rows: list[dict], questions, verifier, steps: list[str], target: float = 0.9) -> dict:
    held = {q.id for q in questions if held_out(q)}
    rows = scored(rows)
    split = _split(rows, held)
    report = {"questions": {"train": len({r["id"] for r in rows if r["id"] not in held}),
                            "held_out": len({r["id"] for r in rows if r["id"] in held})},
              "before": block(split["held_out"]),
              "heavy_only": block(split["held_out"], drafted=set())}
    feats = verdict_features(rows, verifier)
    cal = calibrate(split["train"], feats, target) if "calibrate" in steps or "router" in steps else None
    tuned_train, tuned_held = split["train"], split["held_out"]
    if cal is not None:
        tuned_train = accepted_under(split["train"], feats, cal["model"], cal["answer_threshold"])
        tuned_held = accepted_under(split["held_out"], feats, cal["model"], cal["answer_threshold"])
        report["calibrate"] = {**block(tuned_held), "answer_threshold": cal["answer_threshold"],
                               "train_precision": cal["precision"], "target_met": cal["target_met"]}
    elif "calibrate" in steps:
        report["calibrate"] = {"skipped": "too few training drafts, or all right / all wrong"}
    if "router" in steps:
        rt = router(split["train"], split["held_out"], tuned_train, tuned_held)
        report["router"] = ({**rt["block"], "threshold": rt["threshold"],
                             "draft_share": rt["draft_share"]} if rt else
                            {"skipped": "too few training rows, or one label only"})
        report["_router_model"] = rt and rt["model"]
    report["_acceptance_model"] = cal and cal["model"]
    return report
