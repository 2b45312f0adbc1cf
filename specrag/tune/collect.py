"""Answer the tune's questions through the served engine, resumably.

Each question is asked twice through the engine the app serves (``pipeline.build``,
prompt cache off so one policy does not reuse the other's prompt): ``heavy-only``
gives the reference answer with its verdict, ``draft-only`` the draft with the verdict
that labels it. Rows are ``bench e2e`` rows (``bench.e2e.answer_row``), appended to
``rows.jsonl`` as they finish, so a killed tune resumes at the answer in flight. The
file goes through ``security.crypto.DataFiles`` (encrypted at rest with
``security.encrypt``, like the audit samples), rewritten whole after each answer: a
tune holds hundreds of rows, not millions. The question's few-word
answer (from the question writer, who saw the passage) is the gold answer, and its
chunk's document the gold source.

Deliberately not here: writing questions (``tune.questions``), fitting (``tune.fit``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tqdm import tqdm

from specrag.bench.e2e import Question, answer_row

POLICIES = ("heavy-only", "draft-only")


def load_jsonl(files, path: Path) -> list[dict]:
    """Rows of a JSON-lines file written by ``save_jsonl`` ([] when absent)."""
    if not path.exists():
        return []
    return [json.loads(x) for x in files.read_bytes(path).decode("utf-8").splitlines() if x.strip()]


def save_jsonl(files, path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    files.write_bytes(tmp, "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8"))
    tmp.replace(path)  # a kill leaves the old file or the new one, never half of one


def over_budget(spent: float, cap: float | None) -> bool:
    """Is the cap reached? A cap of 0 allows free (local) models only: it is reached by
    the first cent, not by nothing spent."""
    if cap is None:
        return False
    return spent > 0 if cap <= 0 else spent >= cap


def collect(engine, questions, collection: str, rows_path: Path, files, *,
            progress: bool = True, max_cost_usd: float | None = None,
            spent_usd: float = 0.0, policies=POLICIES) -> list[dict]:
    """Rows for every (question, policy), skipping those already in ``rows_path``; stops
    before the next question once ``max_cost_usd`` is spent (question writing included
    through ``spent_usd``). ``policies``: which answers each question gets (the distilled
    draft's held-out replay asks for ``draft-only`` alone)."""
    rows = load_jsonl(files, rows_path)
    done = {(r["id"], r["policy"]) for r in rows}
    spent = spent_usd + sum(r.get("cost_usd") or 0.0 for r in rows)
    todo = [q for q in questions if any((q.id, p) not in done for p in policies)]
    bar = tqdm(total=len(questions), initial=len(questions) - len(todo), desc="answer",
               unit="question", disable=not progress)
    for q in todo:
        if over_budget(spent, max_cost_usd):
            bar.write(f"budget of ${max_cost_usd:.2f} reached: {bar.n} of "
                      f"{len(questions)} questions answered")
            break
        asked = Question(q.id, q.question, (q.answer,), q.source)
        for policy in policies:
            if (q.id, policy) in done:
                continue
            row = asyncio.run(answer_row(engine, asked, policy, collection))
            row["kind"] = q.kind
            spent += row.get("cost_usd") or 0.0
            rows.append(row)
            save_jsonl(files, rows_path, rows)
        bar.update(1)
    bar.close()
    wanted = {q.id for q in questions}
    return [r for r in rows if r["id"] in wanted]
