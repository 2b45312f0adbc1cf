"""Verifier benchmark on held-out ``test`` pairs: quality per source, latency, int8 vs fp32.

``run(settings)`` scores each test pair as a draft with the production ``Verifier``
(sentence split, max over chunks, min over sentences) and reports per source:
balanced accuracy at 0.5 and at the configured (calibrated) threshold, AUROC,
precision/recall at that threshold, and a *length-only baseline* (the claim's length
in characters as the score, best direction, best threshold chosen on the test set
itself, so the baseline is favoured). Latency: one verification of a 3-sentence draft
against 10 chunks (p50/p95), and throughput in pairs/s, for int8 and, when the fp32
export of the training run exists, fp32 in the same process. ``without`` leaves sources
out with the sets built from them (``training.data.kept``), as a run trained without them.

Deliberately not here: training and threshold choice (``training.calibrate``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from specrag.datasets import pairs as data
from specrag.datasets.training_sources import work_dir
from specrag.grounding.crossencoder import CrossEncoder
from specrag.grounding.evidence import select
from specrag.grounding.text import claims, split_sentences
from specrag.grounding.verifier import Verifier, _norm
from specrag.grounding.verifier import Verifier as Plain
from specrag.settings import Settings

SOURCES = ("vitaminc", "halueval-qa", "halueval-sum", "synthetic")
HARD = ("counterfactual", "counterfactual-vitc", "paraphrase", "noisy")  # training.counterfactual
CHECKS = ("rte", "cb")  # standard NLI sets, whole validation splits; not part of "all"


def _metrics(scores, labels, threshold: float) -> dict:
    from sklearn.metrics import roc_auc_score

    scores, y = np.asarray(scores, float), np.asarray(labels, float) >= 0.5

    def bacc(pred):
        return float((pred[y].mean() + (~pred[~y]).mean()) / 2) if y.any() and (~y).any() else float("nan")

    acc = scores >= threshold
    return {"n": int(len(y)), "balanced_accuracy@0.5": bacc(scores >= 0.5),
            "balanced_accuracy@t": bacc(acc),
            "auroc": float(roc_auc_score(y, scores)) if y.any() and (~y).any() else float("nan"),
            "precision@t": float(y[acc].mean()) if acc.any() else float("nan"),
            "recall@t": float(acc[y].mean()) if y.any() else float("nan")}


def length_baseline(lengths, labels) -> dict:
    from sklearn.metrics import roc_auc_score

    x, y = np.asarray(lengths, float), np.asarray(labels, float) >= 0.5
    auc = float(roc_auc_score(y, x))
    sign = 1.0 if auc >= 0.5 else -1.0
    best = 0.0
    for t in np.unique(x):
        pred = sign * x >= sign * t
        best = max(best, float((pred[y].mean() + (~pred[~y]).mean()) / 2))
    return {"auroc": max(auc, 1 - auc), "balanced_accuracy": best}


def _latencies(cases: dict, chunks: list[str], draft: str, runs: int) -> dict:
    """Each case ``name -> (scorer, verifier, question)`` verifies ``draft`` against
    ``chunks`` ``runs`` times, the cases interleaved (a background hiccup hits all of them,
    not one row), the scorer's remembered scores forgotten before each run."""
    for scorer, v, question in cases.values():
        v.verify(draft, chunks, question)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (scorer, v, question) in cases.items():
            getattr(scorer, "clear_cache", lambda: None)()
            t = time.perf_counter()
            v.verify(draft, chunks, question)
            times[name].append((time.perf_counter() - t) * 1000)
    out = {}
    for name, (scorer, _, _) in cases.items():
        out[name] = {"p50_ms": float(np.percentile(times[name], 50)),
                     "p95_ms": float(np.percentile(times[name], 95)),
                     "pairs_per_s": _throughput(scorer, chunks, draft)}
    return out


def _throughput(scorer, chunks: list[str], draft: str) -> float:
    pairs = [(c, s) for c in chunks for s in [draft] * 8][:256]
    t = time.perf_counter()
    if getattr(scorer, "cache_size", 0):  # scored one by one: each repeat is scored again
        for pair in pairs:
            scorer.clear_cache()
            scorer.predict([pair])
    else:
        scorer.predict(pairs)
    return len(pairs) / (time.perf_counter() - t)


def latency_case(pairs) -> tuple[list[str], str]:
    """(10 passages, a draft of 3 one-sentence claims about three of them, none copied
    from its passage): the paraphrase set's supported rewordings, else (no hard sets) the
    synthetic set's changed sentences. A copied sentence is not scored at all, so it
    would time nothing."""
    def fresh(p):
        return (len(claims(p.hypothesis)) == 1 and _norm(p.hypothesis)
                not in {_norm(x) for x in split_sentences(p.premise)})

    for source, label in (("paraphrase", 1), ("synthetic", 0)):
        said = {}
        for p in pairs:
            if p.source == source and p.label == label and fresh(p):
                said.setdefault(p.premise, p.hypothesis)
        if len(said) >= 3:
            chunks = list(said)[:10]
            return chunks, " ".join(said[c] for c in chunks[:3])
    raise ValueError("no claims to time: the benchmark needs paraphrase or synthetic pairs")


def draft_scores(verifier, pairs, progress: bool = False) -> np.ndarray:
    """Verifier score of each pair's hypothesis as a draft, its premise as the one chunk."""
    from tqdm import tqdm

    return np.array([verifier.verify(p.hypothesis, [p.premise]).score
                     for p in tqdm(pairs, desc="verify", unit="draft", disable=not progress,
                                   mininterval=5)], dtype=np.float64)


def run(settings: Settings, model_dir: Path | None = None, fp32_path: Path | None = None,
        quick: bool = False, n_per_source: int | None = None, seed: int = 0,
        progress: bool = False, out_dir: Path | None = None, n_hard: int | None = None,
        without=()) -> dict:
    n = n_per_source or (400 if quick else 1000)
    model = str(model_dir) if model_dir else None
    int8 = CrossEncoder(settings, "verifier", model=model).warm_up()
    threshold = settings.verify.threshold
    use = data.kept(SOURCES + HARD, without)
    pairs = data.sample(data.verifier_pairs(settings, seed, use), "test",
                        {s: n if s in SOURCES else n_hard or (300 if quick else 600) for s in use},
                        seed)
    pairs += data.nli_checks(settings)  # [] without pyarrow
    verifier = Verifier.from_settings(settings, scorer=int8).warm_up()  # as served
    scores = draft_scores(verifier, pairs, progress)
    # the classifier alone on each labelled pair (claim whole, premise cut as in serving)
    words = settings.verify.evidence_words
    pair_scores = int8.predict([(select(p.premise, p.hypothesis, words), p.hypothesis) for p in pairs])
    if verifier.head is not None:  # the served cell score: the head over the CE and the spans
        pair_scores = verifier.head.score(pair_scores, [(p.premise, p.hypothesis) for p in pairs])
    result: dict = {"model": str(int8.model_dir), "threshold": threshold, "per_source": {},
                    **({"without": data.left_out(without)} if without else {})}
    present = [c for c in CHECKS if any(p.source == c for p in pairs)]
    for src in SOURCES + ("all",) + HARD + tuple(present):
        idx = [i for i, p in enumerate(pairs)
               if p.source == src or (src == "all" and p.source in SOURCES)]
        if not idx:
            continue
        labels = [pairs[i].label for i in idx]
        row = _metrics(scores[idx], labels, threshold)
        pair = _metrics(pair_scores[idx], labels, 0.5)
        row["pair_balanced_accuracy@0.5"], row["pair_auroc"] = pair["balanced_accuracy@0.5"], pair["auroc"]
        row["length_baseline"] = length_baseline([len(pairs[i].hypothesis) for i in idx], labels)
        result["per_source"][src] = row
    # which near misses get through: share of each kind at or above the threshold
    result["per_kind"] = {}
    for i, p in enumerate(pairs):
        if p.source in HARD and p.kind:
            row = result["per_kind"].setdefault(f"{p.source}/{p.kind}/{int(p.label)}", [0, 0])
            row[0] += 1
            row[1] += int(scores[i] >= threshold)
    # latency: a 3-sentence draft against 10 real test passages (~100-250 tokens); its
    # sentences are the paraphrase set's supported rewordings of three of them: a sentence
    # copied from a chunk is settled without the cross-encoder and would time nothing
    chunks, draft = latency_case(pairs)
    pairs = [p for p in pairs if p.source in SOURCES]
    runs = 20 if quick else 50

    def plain(scorer, **kw):
        return (scorer, Plain(Settings(), scorer=scorer, **kw), None)

    # as served: the served verifier built above (its prefilter, the head, and "does it
    # answer the question?")
    served = (f"as served (top-{verifier.per_sentence or 'all'}, head"
              f"{', relevance' if verifier.acceptance_model is not None else ''})")
    cases = {"int8, whole chunks": plain(int8, evidence_words=0), "int8": plain(int8),
             "int8, top-3 chunks per sentence": plain(int8, per_sentence=3),
             "int8, top-1 chunk per sentence": plain(int8, per_sentence=1),
             served: (int8, verifier, "What does the first passage say?")}
    fp32_path = fp32_path or work_dir(settings, "verifier", model_dir) / "model-fp32.onnx"
    fp32 = None
    if Path(fp32_path).exists():
        fp32 = CrossEncoder(settings, "verifier", model=model, backend="onnx-fp32",
                            onnx_path=str(fp32_path)).warm_up()
        cases["fp32"] = plain(fp32)
    result["latency"] = {"draft_sentences": len(claims(draft)), "chunks": len(chunks),
                         **_latencies(cases, chunks, draft, runs)}
    if fp32 is not None:
        cut = [(select(p.premise, p.hypothesis, words), p.hypothesis) for p in pairs[:300]]
        diff = np.abs(fp32.predict(cut) - int8.predict(cut))
        result["int8_vs_fp32_max_abs_diff"] = float(diff.max())
        result["int8_vs_fp32_mean_abs_diff"] = float(diff.mean())
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "verifier.json").write_text(json.dumps(result, indent=2))
        (Path(out_dir) / "verifier.md").write_text(to_markdown(result))
    return result


def _f(v) -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.3f}"


def to_markdown(r: dict) -> str:
    t = r["threshold"]
    lines = [f"Held-out `test` split, label-balanced; each claim verified as a draft against its "
             f"context. Threshold t = {t} (`verify.threshold`). `all` is the sources above "
             "it; RTE and CB (whole validation sets, never trained on) are standard NLI checks.", "",
             "Draft columns verify each claim as a draft (sentence split, max over chunks, min "
             "over sentences); pair columns score the labelled pair whole, as NLI papers do."
             + (f" Left out: {', '.join(r['without'])}." if r.get("without") else ""), "",
             "| source | n | bal. acc @0.5 | bal. acc @t | AUROC | precision @t | recall @t "
             "| pair bal. acc @0.5 | pair AUROC | length-only bal. acc | length-only AUROC |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for src, m in r["per_source"].items():
        lb = m["length_baseline"]
        lines.append(f"| {src} | {m['n']} | {_f(m['balanced_accuracy@0.5'])} | "
                     f"{_f(m['balanced_accuracy@t'])} | {_f(m['auroc'])} | {_f(m['precision@t'])} | "
                     f"{_f(m['recall@t'])} | {_f(m.get('pair_balanced_accuracy@0.5'))} | "
                     f"{_f(m.get('pair_auroc'))} | {_f(lb['balanced_accuracy'])} | {_f(lb['auroc'])} |")
    if r.get("per_kind"):
        lines += ["", "Hard sets by kind (label 1 = supported): share verified at or above t.", "",
                  "| set / kind / label | n | at or above t |", "|---|---|---|"]
        lines += [f"| {k} | {n} | {ok / n:.2f} |" for k, (n, ok) in sorted(r["per_kind"].items())]
    lat = r["latency"]
    lines += ["", f"Latency of one verification ({lat['draft_sentences']} sentences x "
              f"{lat['chunks']} chunks; the sentences reword three of the chunks (the paraphrase "
              "set's supported claims), none copied; each chunk cut to its "
              "sentences about the claim (`verify.evidence_words`) unless \"whole chunks\"; "
              "top-k: the lexical prefilter `Verifier(per_sentence=k)`; each pair scored as the "
              "int8 cross-encoder's `verify.batch_size` says), 2 CPU cores:", "",
              "| backend | p50 ms | p95 ms | pairs/s |", "|---|---|---|---|"]
    for b, row in lat.items():
        if isinstance(row, dict):
            lines.append(f"| {b} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} | "
                         f"{row['pairs_per_s']:.0f} |")
    if "int8_vs_fp32_max_abs_diff" in r:
        lines.append(f"\n|P_int8 - P_fp32| over 300 test pairs: mean "
                     f"{r.get('int8_vs_fp32_mean_abs_diff', float('nan')):.3f}, max "
                     f"{r['int8_vs_fp32_max_abs_diff']:.3f}")
    return "\n".join(lines) + "\n"
