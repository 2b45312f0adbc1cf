"""Train the query router on end-to-end rows: would this question's draft have done?

``train_router(run_dirs, settings)`` reads the ``draft-only`` rows of finished ``specrag
bench e2e`` runs (or any run folder of the same shape: a user's own labelled
questions), and for each question

1. takes the router's features the row recorded (``route_features``), or for older rows
   retrieves again from the run's own store (``RUN_DIR/data``; the same embedder and
   chunks the engine saw), and
2. verifies the recorded draft with today's verifier *with the question* (the served
   acceptance decision): the label is *accepted and right* (contains a gold answer,
   gold passage retrieved: ``calibrate_e2e.label``). A draft that is rejected, abstains,
   or is accepted but wrong is one the heavy tier should have answered from the start.

It then scores the router honestly with 5 folds split by a hash of each question id
(every question is predicted by a model that never saw it): AUROC, and, for runs that
also hold ``heavy-only`` rows, the routed policy replayed over its threshold
(``e2e_report.routed_at``: accuracy, p50 latency and heavy tokens against heavy-only).
The shipped model is then fitted on all rows, with the threshold ``D/H``: the median
draft path over the median heavy-only answer of those runs (drafting pays on average
when P(draft will do) x H > D).

Deliberately not here: the features and the model (``routing``), generation (nothing
is regenerated; the rows are replayed).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from specrag.bench import e2e_report
from specrag.bench.metrics import percentile
from specrag.pipeline.build import build_verifier
from specrag.retrieval.retriever import Retriever
from specrag.routing.features import route_features
from specrag.routing.router import RouterModel
from specrag.settings import Settings
from specrag.training.calibrate_e2e import COLLECTION, draft_rows, label
from specrag.types import SpecragError

FOLDS = 5


def fold_of(key: str) -> int:
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % FOLDS


def router_rows(run_dirs, settings: Settings, verifier=None, progress: bool = False,
                embedder=None) -> list[dict]:
    """Each draft-only row with ``features`` (router inputs) and ``label`` (accepted and
    right). ``verifier``/``embedder``: default the configured (served) models."""
    from tqdm import tqdm


    verifier = (verifier or build_verifier(settings)).warm_up()
    out = []
    for d in map(Path, run_dirs):
        rows = draft_rows(d, settings)
        retriever = None  # rows that record their router inputs need no store
        for r in tqdm(rows, desc=f"route {d.name}", unit="q", disable=not progress):
            feats = r.get("route_features")
            if feats is None:
                if retriever is None:
                    s = settings.with_values(data_dir=str(d / "data"),
                                             cache_dir=str(settings.cache_path))
                    retriever = Retriever(s, embedder=embedder).warm_up()
                hits = retriever.retrieve(r["question"], top_k=10, collection=COLLECTION).hits
                feats = route_features(r["question"], hits, settings.retrieval.draft_k)
            v = verifier.verify(r["draft"], r["verify_chunks"], r["question"])
            accepted = v.accepted and not v.abstained
            out.append({**r, "features": feats,
                        "accepted": accepted, "verdict_score": v.score,
                        "abstained": v.abstained, "label": float(accepted and label(r))})
    if not out:
        raise SpecragError("no draft-only rows to train the router on")
    return out


def _auroc(y, p) -> float:
    from sklearn.metrics import roc_auc_score

    y = np.asarray(y)
    return float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else float("nan")


def out_of_fold(rows: list[dict]) -> np.ndarray:
    """Each row's P(draft will do) from a model fitted on the other folds."""
    folds = np.array([fold_of(f"{r['run']}/{r['id']}") for r in rows])
    p = np.zeros(len(rows))
    for k in range(FOLDS):
        train = folds != k
        if (folds == k).any():
            m = RouterModel.fit([r["features"] for r, t in zip(rows, train) if t],
                                [r["label"] for r, t in zip(rows, train) if t])
            p[folds == k] = [m.predict(r["features"]) for r, t in zip(rows, ~train) if t]
    return p


def _policy_rows(run_dir: Path, policy: str) -> list[dict]:
    rows = [json.loads(x) for x in (run_dir / "rows.jsonl").read_text().splitlines() if x.strip()]
    return [r for r in rows if r["policy"] == policy]


def draft_heavy_ratio(run_dirs) -> float | None:
    """Median draft path / median heavy-only answer over the runs that have both."""
    d_ms, h_ms = [], []
    for d in map(Path, run_dirs):
        heavy = _policy_rows(d, "heavy-only")
        if heavy:
            d_ms += [r["timings_ms"]["total"] for r in _policy_rows(d, "draft-only")]
            h_ms += [r["timings_ms"]["total"] for r in heavy]
    return percentile(d_ms, 50) / percentile(h_ms, 50) if d_ms and h_ms else None


def curve(rows: list[dict], p: np.ndarray, run_dirs, steps: int = 20) -> dict[str, list[dict]]:
    """Per run with heavy-only rows: the routed policy replayed at thresholds 0..1."""
    out = {}
    for d in map(Path, run_dirs):
        heavy = _policy_rows(d, "heavy-only")
        if not heavy:
            continue
        mine = [(r, q) for r, q in zip(rows, p) if r["run"] == d.name]
        by = {"draft-only": [r for r, _ in mine], "heavy-only": heavy}
        probs = {r["id"]: float(q) for r, q in mine}
        base = e2e_report.routed_at(by, probs, 2.0)  # nothing drafted: heavy-only
        h_p50, h_tok = base["total_p50_ms"], base["heavy_tokens"]
        points = []
        for t in [k / steps for k in range(steps + 1)]:
            pt = e2e_report.routed_at(by, probs, t)
            points.append({**pt, "heavy_only_accuracy": base["accuracy"],
                           "p50_vs_heavy_only": pt["total_p50_ms"] / h_p50 if h_p50 else None,
                           "tokens_vs_heavy_only": pt["heavy_tokens"] / h_tok if h_tok else None})
        out[d.name] = points
    return out


def train_router(run_dirs, settings: Settings, out: Path | None = None, verifier=None,
                 progress: bool = False, embedder=None) -> dict:
    """Fit, report (out of fold) and write ``router.json`` (default: the configured model
    path when it is a file, else ``DATA_DIR/router/router.json``)."""
    rows = router_rows(run_dirs, settings, verifier, progress, embedder)
    y = np.array([r["label"] for r in rows])
    p = out_of_fold(rows)
    ratio = draft_heavy_ratio(run_dirs)
    threshold = round(ratio, 2) if ratio else 0.35
    model = RouterModel.fit([r["features"] for r in rows], y, threshold=threshold,
                            fitted_on=", ".join(sorted({r["run"] for r in rows})))
    path = model.save(out or settings.data_path / "router" / "router.json")
    per_run = {run: {"questions": int(sum(r["run"] == run for r in rows)),
                     "draft_will_do": float(np.mean([r["label"] for r in rows if r["run"] == run])),
                     "auroc": _auroc([r["label"] for r in rows if r["run"] == run],
                                     [q for r, q in zip(rows, p) if r["run"] == run])}
               for run in sorted({r["run"] for r in rows})}
    return {"path": str(path), "model": model, "questions": len(rows),
            "draft_will_do": float(y.mean()), "auroc_out_of_fold": _auroc(y, p),
            "per_run": per_run, "draft_heavy_ratio": ratio, "threshold": threshold,
            "curve": curve(rows, p, run_dirs)}
