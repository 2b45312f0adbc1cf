"""Calibrate acceptance on what users care about: was the accepted draft right?

``calibrate_e2e(run_dirs, settings)`` reads the ``draft-only`` rows of finished ``specrag
bench e2e`` runs, verifies each stored draft again with today's verifier against the
chunks the engine verified it against (recorded in the row, else retrieved again from
the run's own store, as ``bench reverify`` does), and labels it *right*: it contains a
gold answer and the gold passage was retrieved (right *and* grounded). The questions
are split in two by a hash of their id: on ``dev`` it fits the ``AcceptanceModel``
(grounding plus "does it answer the question?") and chooses the threshold
(``verify.answer_threshold`` on P(right)) that accepts the most drafts at the target
precision; ``test`` only reports. Drafts that only
abstain are never accepted (they escalate) and count in the acceptance denominator.

Deliberately not here: generation (the rows are replayed, nothing is regenerated),
pair-label calibration (``calibrate``) and the signals themselves (``grounding``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from specrag.bench import metrics
from specrag.grounding.acceptance import AcceptanceModel
from specrag.pipeline.build import build_verifier
from specrag.retrieval.retriever import Retriever
from specrag.settings import Settings
from specrag.tune.fit import choose
from specrag.types import SpecragError

COLLECTION = "bench-e2e"


def split_of(row_id: str) -> str:
    return "dev" if int(hashlib.sha1(row_id.encode()).hexdigest()[:8], 16) % 2 == 0 else "test"


def label(row: dict) -> float:
    right = metrics.containment(row["draft"], row["answers"]) >= 1.0
    return float(right and row.get("gold_retrieved", True))


def draft_rows(run_dir: Path, settings: Settings) -> list[dict]:
    """The run's draft-only rows, each with ``chunks`` (the texts it was verified against)."""
    rows = [json.loads(x) for x in (run_dir / "rows.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r["policy"] == "draft-only" and r.get("draft") and r.get("answers")]
    if not rows:
        raise SpecragError(f"{run_dir} has no draft-only rows with gold answers: run "
                           "`specrag bench e2e --policies draft-only,...` first")
    need = [r for r in rows if not r.get("verify_chunks")]
    if need:
        if not (run_dir / "data").is_dir():
            raise SpecragError(f"{run_dir}/data (the run's store) is gone and its rows do not "
                               "record their chunks: run the same `bench e2e` command again "
                               "into this folder (it only ingests, nothing is regenerated)")
        s = settings.with_values(data_dir=str(run_dir / "data"), cache_dir=str(settings.cache_path))
        retriever = Retriever(s).warm_up()
        for r in need:
            hits = retriever.retrieve(r["question"], top_k=s.retrieval.verify_k,
                                      collection=COLLECTION).hits
            r["verify_chunks"] = [h.chunk.text for h in hits]
    return [{**r, "run": run_dir.name} for r in rows]



def evaluate(g, p, y, abstained, tg: float, ta: float) -> dict:
    g, p, y, ab = (np.asarray(a, float) for a in (g, p, y, abstained))
    acc = (g >= tg) & (p >= ta) & (ab < 0.5)
    return {"drafts": int(len(y)), "right": float(y.mean()) if len(y) else float("nan"),
            "acceptance": float(acc.mean()) if len(y) else float("nan"),
            "precision": float(y[acc].mean()) if acc.any() else float("nan"),
            "recall": float(acc[y > 0].mean()) if (y > 0).any() else float("nan")}


def calibrate_e2e(run_dirs: list[str | Path], settings: Settings, target_precision: float = 0.9,
                  verifier=None, progress: bool = False) -> dict:
    """Fits the acceptance model and ``verify.answer_threshold``; ``verify.threshold``
    (grounding alone, chosen on pair labels) stays as it is: with the acceptance model
    on, P(right) alone decides, and it already weighs the grounding."""
    from tqdm import tqdm


    rows = [r for d in run_dirs for r in draft_rows(Path(d), settings)]
    base = verifier or build_verifier(settings)
    base.warm_up()
    feats = []
    for r in tqdm(rows, desc="verify", unit="draft", disable=not progress):
        v = base.verify(r["draft"], r["verify_chunks"])  # grounding alone: no question
        signals = base.signals(r["question"], r["draft"], r["verify_chunks"], v.sentences)
        feats.append((v.grounding, signals, v.abstained))
    y = np.array([label(r) for r in rows])
    split = np.array([split_of(f"{r['run']}/{r['id']}") for r in rows])
    ab = np.array([f[2] for f in feats], dtype=float)
    dev = (split == "dev") & (ab < 0.5)
    model = AcceptanceModel.fit([f[0] for f, k in zip(feats, dev) if k],
                                [f[1] for f, k in zip(feats, dev) if k], y[dev],
                                fitted_on=", ".join(sorted({r["run"] for r in rows})))
    g = np.array([f[0] for f in feats])
    p = np.array([model.combine(f[0], model.relevance(f[1])) for f in feats])
    chosen = choose(g[dev], p[dev], y[dev], target_precision, grounding=0.0)
    tg, ta = chosen["threshold"], chosen["answer_threshold"]
    out = {"target_precision": target_precision, "model": model, **chosen, "per_split": {}}
    for name in ("dev", "test"):
        m = split == name
        out["per_split"][name] = evaluate(g[m], p[m], y[m], ab[m], tg, ta)
        for run in sorted({r["run"] for r in rows}):
            k = m & np.array([r["run"] == run for r in rows])
            out["per_split"][f"{name}/{run}"] = evaluate(g[k], p[k], y[k], ab[k], tg, ta)
    # grounding alone, for comparison: the best grounding threshold on dev, on test
    alone = choose(g[dev], np.ones(dev.sum()), y[dev], target_precision)
    out["grounding_only"] = {"threshold": alone["threshold"],
                             "test": evaluate(g[split == "test"], np.ones((split == "test").sum()),
                                              y[split == "test"], ab[split == "test"],
                                              alone["threshold"], 0.0)}
    return out
