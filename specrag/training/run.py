"""``specrag train verifier|reranker``: data -> fit -> int8 ONNX -> evaluation -> model card.

Each run is reproducible from what it records in the model folder's ``specrag.json``:
the seed, the training config, the pinned data sources and how many pairs of each
were used. ``without`` (``--without vitaminc``) leaves a source out, with the sets built
from it (``training.data.kept``): the record then says so and no longer lists its file.
``out`` defaults to ``specrag/models/<name>`` (the shipped default); the fp32 ONNX and
torch checkpoint go to ``cache/training/runs/<name>`` for benchmarks. Evaluation
failures never lose a trained model: the card then says to run ``specrag bench``.

Deliberately not here: the training loop (``training.train``), pair construction
(``training.data``, ``training.rerank_data``) and metrics (``bench.verifier``/``reranker``).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from specrag import sources
from specrag.datasets import PINNED
from specrag.grounding.crossencoder import CrossEncoder
from specrag.grounding.evidence import select
from specrag.grounding.head import GroundingHead, cell_inputs
from specrag.settings import Settings
from specrag.training import data, rerank_data
from specrag.training.data import left_out
from specrag.training.sources import BIGBENCH, WHEELS, work_dir
from specrag.training.train import TrainConfig, export, fit

# Sized for about an hour on two idle cores: 3,678 steps of 16 evidence-cut pairs, ~1.0 s
# per batch under bf16 autocast (Zen 4 with AVX-512 BF16, ~65 min); measured in fp32 on a
# Zen 3 without bf16: 4,825 s (1.31 s per batch). HaluEval-QA has only 1,748
# length-matched training pairs, so it is seen three times; the curriculum
# (``VERIFIER_FIRST``) is trained first (see ``training.train``). The hard sets
# (``training.counterfactual``: passages whose answer was swapped, names of the same
# passage in another role, paraphrases, noisy chunks) teach the model to follow the
# passage, not what it knows; counterfactual-vitc stays held out. Trained from scratch on
# this mix, VitaminC and HaluEval-sum stay below the model trained without the hard sets
# (BENCHMARKS.md, "A verifier trained from scratch on the full mix").
VERIFIER_TRAIN = {"vitaminc": 18000, "halueval-qa": 1748, "synthetic": 8000, "halueval-sum": 9000,
                  "counterfactual": 8000, "paraphrase": 5000, "noisy": 4000}
# ``--init``: continue a shipped verifier (``training.from_onnx``) on the hard sets, with
# the original sources replayed so it keeps what it knew; ~1,100 steps, ~25 min on 2 cores
VERIFIER_CONTINUE = {"vitaminc": 4000, "halueval-qa": 1748, "synthetic": 1500, "halueval-sum": 2000,
                     "counterfactual": 4000, "paraphrase": 3000, "noisy": 2000}
CONTINUE_CONFIG = {"lr": 3e-5, "head_lr": 1e-4, "warmup": 0.06}
VERIFIER_REPEAT = {"halueval-qa": 3}
VERIFIER_FIRST = {"synthetic": 1200, "halueval-qa": 400}
RERANKER_QUESTIONS = {"halueval-qa": 3000, "squad": 794}  # all of SQuAD's training questions
RERANKER_FIRST = 400  # curriculum: questions with random (easy) negatives, trained first
SERVE_MAX_LENGTH = 256  # a chunk (~200 tokens) plus one claim
CONFIGS = {"verifier": TrainConfig("verifier", max_length=160, lr=1e-4, warmup=0.1),
           "reranker": TrainConfig("reranker", max_length=192, lr=5e-5)}


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def data_versions(without=()) -> dict:
    """The pinned files a run reads; BIG-bench only where VitaminC was read from it."""
    bigbench = {} if "vitaminc" in without else {
        "bigbench": f"{BIGBENCH['file']}#sha256={BIGBENCH['sha256']}"}
    return {**bigbench, **WHEELS, **{f"datasets:{k}": v for k, v in PINNED.items()}}


def train_verifier(settings: Settings, out: Path | None = None, scale: float = 1.0,
                   seed: int = 0, progress: bool = True, evaluate: bool = True,
                   init: Path | None = None, precision: str = "auto", without=()) -> Path:
    without = data.left_out(without)
    out = Path(out) if out else sources.BUILTIN_DIR / "verifier"
    config = replace(CONFIGS["verifier"], seed=seed, precision=precision,
                     **(CONTINUE_CONFIG if init else {}))
    sizes = VERIFIER_CONTINUE if init else VERIFIER_TRAIN
    use = data.kept(sizes, without)
    per_source = {k: max(8, int(v * scale)) for k, v in sizes.items() if k in use}
    _log("reading verifier data")
    every = data.verifier_pairs(settings, seed, tuple(per_source))
    pairs = data.sample(every, "train", per_source, seed)
    pairs += [p for p in pairs if p.source in VERIFIER_REPEAT
              for _ in range(VERIFIER_REPEAT[p.source] - 1)]
    # the curriculum is not scaled down with the rest above a tenth: with 1,120 pairs
    # (scale 0.7) the loss never left ln 2 in 290 steps; the shipped 1,600 get it off
    cur = scale if scale < 0.1 or scale > 1 else 1.0  # tiny test runs keep tiny curricula
    curriculum = {k: VERIFIER_FIRST[k] for k in data.kept(VERIFIER_FIRST, without)}
    first = [] if init else data.sample(  # a trained model needs no curriculum
        every, "train", {k: max(8, int(v * cur)) for k, v in curriculum.items()}, seed + 1)
    counts = {s: sum(p.source == s for p in pairs) for s in per_source}
    _log(f"training on {len(first)} curriculum pairs, then {len(pairs)} pairs {counts}")
    words = settings.verify.evidence_words

    def cut(ps):  # the verifier's own evidence cut (``evidence.select``), so serving matches
        return [(select(p.premise, p.hypothesis, words), p.hypothesis, p.label) for p in ps]

    return _finish(settings, "verifier", cut(pairs), config, out, progress, evaluate,
                   {"train_pairs": counts, "repeat": VERIFIER_REPEAT,
                    "curriculum_pairs": {s: sum(p.source == s for p in first) for s in curriculum},
                    "evidence_words": words, "pooling": "mean",
                    "pair_order": "premise, hypothesis",
                    **({"init": _init_record(init)} if init else {})}, first=cut(first),
                   init=init, without=without)


def _init_record(init: Path) -> dict:
    """What a continued run started from: the folder and its own training record."""
    meta = json.loads((Path(init) / "specrag.json").read_text()) if (Path(init) / "specrag.json").is_file() else {}
    digest = sources.sha256_file(Path(init) / "model-int8.onnx")
    return {"model": str(init), "sha256": digest, "created": meta.get("created"),
            "train_pairs": meta.get("train_pairs"), "init": meta.get("init")}


HEAD_SOURCES = ("vitaminc", "halueval-qa", "halueval-sum", "synthetic", "counterfactual",
                "paraphrase", "noisy")  # counterfactual-vitc stays held out from the head too


def train_head(settings: Settings, out: Path | None = None, n_per_source: int = 400,
               seed: int = 0, without=()) -> Path:
    """Fit the verifier's ``GroundingHead`` on ``dev`` pairs and write ``head.json`` beside
    the model (``out``, default the configured verifier): seconds, not an hour. Its
    ``fitted_on`` names the sources it saw, so a head fitted ``without`` some says so."""
    use = data.kept(HEAD_SOURCES, without)
    ce = CrossEncoder(settings, "verifier", model=str(out) if out else None).warm_up()
    _log("reading dev pairs")
    pairs = data.sample(data.verifier_pairs(settings, seed, use), "dev",
                        {s: n_per_source for s in use}, seed)
    words = settings.verify.evidence_words
    _log(f"scoring {len(pairs)} dev pairs")
    scores = ce.predict([(select(p.premise, p.hypothesis, words), p.hypothesis) for p in pairs])
    gone, roles = cell_inputs([(p.premise, p.hypothesis) for p in pairs])
    counts = {s: sum(p.source == s for p in pairs) for s in use}
    head = GroundingHead.fit(scores, gone, [p.label for p in pairs], roles,
                             fitted_on="dev pairs: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    path = head.save(ce.model_dir)
    _log(f"head {head.weights} (intercept {head.intercept}) written to {path}")
    return ce.model_dir


def train_reranker(settings: Settings, out: Path | None = None, scale: float = 1.0,
                   seed: int = 0, progress: bool = True, evaluate: bool = True,
                   precision: str = "auto", without=()) -> Path:
    """The reranker reads HaluEval-QA and SQuAD questions only, never VitaminC: ``without``
    is checked and recorded so ``specrag train ... --without`` means the same everywhere."""
    without = left_out(without)
    out = Path(out) if out else sources.BUILTIN_DIR / "reranker"
    config = replace(CONFIGS["reranker"], seed=seed, precision=precision)
    items = []
    for name, n in RERANKER_QUESTIONS.items():
        _log(f"mining hard negatives for {name} with the bi-encoder")
        items += rerank_data.rerank_items(settings, "train", max(4, int(n * scale)), seed,
                                          datasets=(name,))
    triples = rerank_data.training_pairs(items, negatives=3, seed=seed)
    first = rerank_data.easy_pairs(items[:max(4, int(RERANKER_FIRST * scale))], seed=seed)
    counts = {name: sum(it.dataset == name for it in items) for name in RERANKER_QUESTIONS}
    _log(f"training on {len(first)} curriculum pairs, then {len(triples)} pairs from {counts} questions")
    return _finish(settings, "reranker", triples, config, out, progress, evaluate,
                   {"train_questions": counts, "negatives_per_question": 3,
                    "curriculum_pairs": len(first), "pooling": "mean",
                    "pair_order": "query, passage"}, first=first, without=without)


def _finish(settings, name, triples, config, out, progress, evaluate, extra, first=(),
            init=None, without=()) -> Path:
    base = sources.resolve("embedder", settings)
    model, tok, stats = fit(triples, config, base, progress=progress, log=_log, first=list(first),
                            init=init)
    _log(f"trained {stats}; exporting int8 ONNX to {out}")
    work = work_dir(settings, name, out)
    export(model, tok, out, work, config.max_length)
    # the reranker never reads VitaminC: its record never lists BIG-bench
    read = data_versions(without if name == "verifier" else ("vitaminc",))
    meta = {"kind": name, "max_length": SERVE_MAX_LENGTH, "train_config": config.to_dict(),
            "base": sources.source_for("embedder", settings), "data": read,
            **({"without": list(without)} if without else {}),
            "train_stats": stats, "created": time.strftime("%Y-%m-%d"), **extra}
    (out / "specrag.json").write_text(json.dumps(meta, indent=2) + "\n")
    evaluation = ""
    if evaluate:
        try:
            evaluation = _evaluate(settings, name, out, work, without)
        except Exception as err:  # noqa: BLE001 - the model is saved; say what to run
            _log(f"evaluation failed ({type(err).__name__}: {err})")
            evaluation = f"Evaluation failed ({type(err).__name__}); run `specrag bench {name}`.\n"
    write_card(out, meta, evaluation)
    _log(f"done: {out}")
    return out


def _evaluate(settings, name, out, work, without=()) -> str:
    # the verifier's test pairs include VitaminC: a run without it is evaluated without it
    if name == "verifier":
        # heavy: the benchmark of the model just trained, only when asked
        from specrag.bench import verifier as bench

        kw = {"without": tuple(without)}
    else:
        # heavy: the benchmark of the model just trained, only when asked
        from specrag.bench import reranker as bench

        kw = {}
    result = bench.run(settings, model_dir=out, fp32_path=work / "model-fp32.onnx", quick=True,
                       **kw)
    return bench.to_markdown(result)


CARD = """# specrag {name}

A {what} distilled from `all-MiniLM-L6-v2` (22M parameters) and fine-tuned on CPU with
`specrag train {name}`; shipped as dynamic per-channel int8 ONNX (`model-int8.onnx`)
with its tokenizer. Input: {order}. Output: one logit; `sigmoid` gives {output}.
Load it with `specrag.grounding.crossencoder.CrossEncoder(settings, "{name}")`.

Training config, seed, pinned data versions and pair counts: `specrag.json`. Data
sources, licenses and splits: `assets/DATA_CARD.md`. Test splits are disjoint by group
(page, context, passage) from the training data.

## Training

{training}

## Head and acceptance

`head.json` (when present; `specrag train head`) is the calibrated head the verifier
applies to every (sentence, chunk) score: a logistic regression over the cross-encoder's
logit and the share of the sentence's names, numbers and dates the chunk lacks, fitted
on `dev` pairs (never `test`; `counterfactual-vitc` not at all). `acceptance.json` (when
present; `specrag calibrate --e2e`) combines the grounded score with "does the draft
answer the question?" into P(right), fitted on replayed end-to-end rows.

## Evaluation

{evaluation}
"""


def write_card(out: Path, meta: dict, evaluation: str) -> None:
    name = meta["kind"]
    what = ("grounding verifier (does the premise support the claim?)" if name == "verifier"
            else "passage reranker")
    output = "P(supported)" if name == "verifier" else "a relevance score"
    st, cfg = meta.get("train_stats", {}), meta.get("train_config", {})
    pairs = meta.get("train_pairs") or meta.get("train_questions") or {}
    training = (f"{st.get('steps', '?')} steps of {cfg.get('batch_size', '?')} pairs "
                f"({st.get('pairs', '?')} pairs; from {', '.join(f'{k} {v}' for k, v in pairs.items())}"
                f"{' questions' if 'train_questions' in meta else ''}), learning rate "
                f"{cfg.get('lr')} (head {cfg.get('head_lr')}), max length {cfg.get('max_length')}, "
                f"seed {cfg.get('seed')}, {meta.get('pooling', 'cls')} pooling; "
                f"{st.get('seconds', '?')} s on {cfg.get('threads', '?')} CPU threads "
                f"({st.get('precision', 'fp32')}), final loss "
                f"(EMA) {st.get('final_loss_ema', '?')}.")
    if cur := meta.get("curriculum_pairs"):
        cur = ", ".join(f"{k} {v}" for k, v in cur.items()) if isinstance(cur, dict) else cur
        training += f" Curriculum first: {cur} pairs."
    if init := meta.get("init"):
        training += (f" Continued from `{init.get('model')}` (sha256 {str(init.get('sha256'))[:12]}…, "
                     f"created {init.get('created')}; its weights recovered from the int8 ONNX by "
                     "`specrag.training.from_onnx`) with `specrag train verifier --init`.")
    if without := meta.get("without"):
        training += (f" Left out (`--without`): {', '.join(without)}, with the sets built from "
                     "it; `specrag.json` lists only the data files read.")
    if meta.get("evidence_words"):
        training += (f" Premises cut to their sentences about the claim "
                     f"({meta['evidence_words']} words, `specrag.grounding.evidence`), as in serving.")
    (out / "README.md").write_text(CARD.format(name=name, what=what, order=meta["pair_order"],
                                               output=output, training=training,
                                               evaluation=evaluation or "(not run)"))
