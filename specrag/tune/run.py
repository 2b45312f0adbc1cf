"""``specrag tune``: make one collection faster and more often right, and say by how much.

``tune(settings, collection, questions=N, steps=[...])`` runs, in ``DATA_DIR/tuning/NAME``:

1. **questions** (``tune.questions``): N chunks sampled across the documents, one
   question each from the heavy tier, kept in ``questions.jsonl`` (a rerun reuses them
   and only writes the missing ones);
2. **answers** (``tune.collect``): heavy-only references and draft-only labels through
   the served engine, in ``rows.jsonl`` (resumable, within ``max_cost_usd``);
3. **calibrate** and **router** (``tune.fit``) on the training split, replayed on the
   held-out split; the steps that help are written to ``tuned.json``
   (``tune.profile``), which the engine applies to that collection from then on and
   ``specrag config show --collection NAME`` shows;
4. **distill** (``tune.distill``): the draft model fine-tuned (LoRA, merged, quantised by
   llama.cpp) on the training split's heavy references, written to ``draft.gguf``; the
   held-out questions are drafted again with it (``rows-distilled.jsonl``) and it becomes
   the collection's ``models.draft`` only if that replay is better, like every step, and
   it says "the documents do not say" to no more answerable questions than the base;
5. **report**: ``report.json``/``report.md`` (and ``report.html`` with plotly bars):
   ``before``, one block per step, ``after`` (the settings written), seconds per step.

Generated questions and answers live under DATA_DIR like the audit samples; with
``security.encrypt`` on they are written through ``security.crypto.DataFiles``.
Only an admin of the collection may tune it (``access.authorize(..., "admin")``).

Deliberately not here: the steps' own work (``tune.questions``, ``tune.collect``,
``tune.fit``, ``tune.distill``).
"""

from __future__ import annotations

import asyncio
import time

from specrag.generators.costs import cost
from specrag.pipeline import profile
from specrag.pipeline.build import build_engine
from specrag.resilience.chains import tier_from_settings
from specrag.security import access
from specrag.security.crypto import DataFiles
from specrag.settings import Settings
from specrag.tune import fit as fitting
from specrag.tune.collect import collect, load_jsonl, over_budget, save_jsonl
from specrag.tune.distill import distill
from specrag.tune.questions import (
    TuneQuestion,
    accept,
    held_out,
    kind_for,
    partner,
    sample,
    write_one,
)
from specrag.tune.report import write
from specrag.types import SpecragError

STEPS = ("calibrate", "router", "distill")


def check_steps(steps) -> list[str]:
    steps = [s.strip() for s in steps if s.strip()]
    for s in steps:
        if s not in STEPS:
            raise SpecragError(f"unknown tune step '{s}'; choose from {', '.join(STEPS)}")
    return steps or list(STEPS)


def _questions(engine, store, collection, n, seed, path, files, progress,
               max_cost_usd: float | None = None) -> tuple[list, float]:
    """Up to ``n`` questions (those already in ``path`` first); stops writing once
    ``max_cost_usd`` is reached (one question's cost may pass it)."""
    from tqdm import tqdm


    kept = [TuneQuestion.from_dict(d) for d in load_jsonl(files, path)]
    spent = 0.0
    picks = sample(store, collection, n * 2, seed)  # twice as many: some replies are dropped
    if not picks:
        raise SpecragError(f"collection '{collection}' has no documents to tune on")
    writer = engine.tier("heavy")
    bar = tqdm(total=n, initial=min(n, len(kept)), desc="questions", unit="q", disable=not progress)
    seen = {q.chunk_ids[0] for q in kept}
    for i, chunks in enumerate(picks):
        if len(kept) >= n:
            break
        if over_budget(spent, max_cost_usd):
            bar.write(f"budget of ${max_cost_usd:.2f} reached while writing questions: "
                      f"{len(kept)} of {n} written")
            break
        if chunks[0].id in seen:
            continue
        kind = kind_for(i)
        if kind == "multi" and len(chunks) == 1:
            other = partner(engine.retriever, collection, chunks[0])
            if other is None:
                kind = "fact"
            else:
                chunks = [chunks[0], other]
        text, usage = asyncio.run(write_one(writer, kind, chunks))
        if usage is not None:
            spent += cost(usage, engine.settings.generation.prices)
        got = accept(kind, text, chunks, kept)
        seen.add(chunks[0].id)
        if isinstance(got, TuneQuestion):
            kept.append(got)
            save_jsonl(files, path, [q.to_dict() for q in kept])
            bar.update(1)
    bar.close()
    return kept[:n], spent


def tune(settings: Settings, collection: str, *, questions: int = 40, steps=STEPS,
         max_cost_usd: float | None = None, target_precision: float = 0.9, seed: int = 0,
         engine=None, principal=None, progress: bool = True, epochs: int = 2) -> dict:
    """Tune ``collection``; returns the report (also written beside ``tuned.json``)."""
    steps = check_steps(steps)
    access.authorize(settings, "admin", collection, principal)  # security: admins only
    folder = profile.folder(settings, collection)
    folder.mkdir(parents=True, exist_ok=True)

    files = DataFiles(settings)
    seconds = {}
    # the served engine, untuned for this collection (the before), without the prompt
    # cache (a policy must not reuse another's prompt) and without the audit sampler
    base = settings.with_values(**{"generation.prompt_cache": False})
    # a copy over the same loaded parts: a shared engine (the app's) is not changed
    engine = engine.replace() if engine is not None else build_engine(base, audit=False)
    engine.tuned_for = collection  # measure the untuned defaults
    engine.warm_up()
    t = time.perf_counter()
    qs, spent = _questions(engine, engine.retriever.store, collection, questions, seed,
                           folder / "questions.jsonl", files, progress, max_cost_usd)
    seconds["questions"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    rows = collect(engine, qs, collection, folder / "rows.jsonl", files, progress=progress,
                   max_cost_usd=max_cost_usd, spent_usd=spent)
    seconds["answers"] = round(time.perf_counter() - t, 1)
    cost_usd = round(spent + sum(r.get("cost_usd") or 0 for r in rows), 6)
    answered = {r["id"] for r in rows}
    if len(answered) < 2:
        # nothing to fit or to compare: say why instead of writing an empty report
        why = (f"the budget of ${max_cost_usd:.2f} was spent (${cost_usd:.4f})"
               if over_budget(cost_usd, max_cost_usd) else
               "the collection gave too few usable questions")
        raise SpecragError(f"cannot tune '{collection}': {len(answered)} question(s) answered "
                           f"of {len(qs)} written; {why}. Ask for more questions or raise "
                           "the cost cap")
    t = time.perf_counter()
    report = fitting.fit(rows, qs, engine.verifier, steps, target_precision)
    seconds["fit"] = round(time.perf_counter() - t, 1)
    acceptance, router = report.pop("_acceptance_model"), report.pop("_router_model", None)
    values, after = {}, report["before"]
    cal = report.get("calibrate", {})
    if acceptance is not None and "calibrate" in steps and fitting.better(cal, report["before"]):
        values["verify.acceptance"] = str(acceptance.save(folder / "acceptance.json"))
        values["verify.answer_threshold"] = cal["answer_threshold"]
        after = cal
    rt = report.get("router", {})
    if router is not None and "skipped" not in rt and fitting.better(rt, after):
        if acceptance is not None and "verify.acceptance" not in values:
            # the router learnt "accepted" under the tuned acceptance: it needs it
            values["verify.acceptance"] = str(acceptance.save(folder / "acceptance.json"))
            values["verify.answer_threshold"] = cal["answer_threshold"]
        values["routing.model"] = str(router.save(folder / "router.json"))
        values["routing.threshold"] = rt["threshold"]
        values["generation.policy"] = "routed"
        after = rt
    if "distill" in steps:
        t = time.perf_counter()
        report["distill"], draft_path = _distill(engine, qs, rows, collection, folder, files,
                                                 report, values, acceptance, epochs, progress)
        seconds["distill"] = round(time.perf_counter() - t, 1)
        # a draft that gives up where the base answered escalates those questions under
        # lazy (draft + heavy time), and the synthetic held-out questions understate it
        if draft_path and fitting.better(report["distill"], after) \
                and not report["distill"]["gives_up_more"]:
            values["models.draft"] = draft_path
            after = report["distill"]
    if values:
        profile.write(settings, collection, values, steps)
    report.update({"collection": collection, "steps": steps, "after": after,
                   "settings_written": values, "seconds": seconds,
                   "cost_usd": cost_usd,
                   "budget": {"max_cost_usd": max_cost_usd,
                              "reached": over_budget(cost_usd, max_cost_usd),
                              "answered": len(answered), "asked": questions},
                   "heavy": settings.generation.heavy, "draft": settings.generation.draft})

    write(report, folder)
    return report


def _distill(engine, qs, rows, collection, folder, files, report, values, acceptance,
             epochs, progress) -> tuple[dict, str | None]:
    """Distil on the training split; replay held out with the distilled draft under the
    acceptance the collection will run with. Returns (block, model path or None)."""
    train = [q for q in qs if not held_out(q)]
    held = [q for q in qs if held_out(q)]
    stats = distill(engine, train, rows, collection, folder, held=held, epochs=epochs,
                    progress=progress)
    if not stats.get("path"):
        return {"skipped": stats.get("skipped", "no model"), **stats}, None
    drafted = folder / "rows-distilled.jsonl"
    if not stats.get("resumed"):
        drafted.unlink(missing_ok=True)  # drafts of an earlier model: draft again
    tuned = engine.settings.with_values(**{"models.draft": stats["path"]})
    student = engine.replace(settings=tuned, draft=tier_from_settings("draft", tuned))
    student.tuned_for = collection
    try:
        student.warm_up()
        new = collect(student, held, collection, drafted, files,
                      progress=progress, policies=("draft-only",))
    finally:
        # the student's llama.cpp worker is the tune's alone: in the app it would
        # otherwise hold ~0.5 GB until the engine copy is collected
        student.draft.close()
    by_id = {r["id"]: r for r in new}
    held_ids = {q.id for q in held}
    replay = [r for r in rows if r["id"] in held_ids and r["policy"] == "heavy-only"]
    replay += [by_id[r["id"]] for r in rows if r["policy"] == "draft-only" and r["id"] in by_id]
    block = fitting.replay_held(replay, student.verifier,
                                acceptance if "verify.acceptance" in values else None,
                                values.get("verify.answer_threshold"))
    # the base and the distilled drafts at one accepted-draft precision (each draft's
    # recorded P(right)): the before's, and the distilled one's own
    base_rows = fitting.scored([r for r in rows if r["id"] in by_id])
    new_rows = fitting.scored(list(by_id.values()))
    matched = []
    for p in (report["before"]["accepted_precision"], block["accepted_precision"]):
        if p is not None:
            matched.append({"precision": round(p, 3),
                            "before": fitting.acceptance_at(base_rows, p),
                            "distill": fitting.acceptance_at(new_rows, p)})
    # answerable held-out questions the draft answered "the documents do not say" to
    answerable = {q.id for q in held if q.kind != "none"}
    gave_up = {name: sum(1 for r in rs if r["id"] in answerable and r.get("abstained"))
               for name, rs in (("before", [r for r in rows if r["policy"] == "draft-only"
                                            and r["id"] in by_id]), ("distill", new))}
    return {**block, **stats, "matched_precision": matched, "gave_up": gave_up,
            "gives_up_more": gave_up["distill"] > gave_up["before"]}, stats["path"]
