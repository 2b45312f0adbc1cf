"""The tables of ``bench followups``: per set, per ``chat.rewrite`` method, per turn index.

``summarize(retrieval_rows, answer_rows, meta)`` folds the rows of ``bench.multiturn``
into shares per turn index (1, 2, 3, 4+), "2+" (every later turn that does not change
topic), "2+" on each half of the conversations (``dev``: where the method was chosen,
``held-out``: the rest), and the topic changes apart. ``to_markdown`` renders them.

Deliberately not here: searching or answering (``bench.multiturn``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from specrag.bench.metrics import percentile

BUCKETS = ("1", "2", "3", "4+")


def _bucket(turn: int) -> str:
    return str(turn) if turn < 4 else "4+"


def _shares(rows: list[dict], keys: tuple[str, ...]) -> dict:
    n = len(rows)
    out = {"n": n, **{k: (sum(bool(r[k]) for r in rows) / n if n else None) for k in keys}}
    if rows and "ms" in rows[0]:
        out["p50_ms"] = percentile([r["ms"] for r in rows], 50)
    return out


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict:
    by: dict[str, list] = defaultdict(list)
    for r in rows:
        if r["topic_change"]:
            by["topic change"].append(r)
            continue
        by[_bucket(r["turn"])].append(r)
        if r["turn"] > 1:
            by["2+"].append(r)
            if "half" in r:
                by["2+ " + ("held-out" if r["half"] else "dev")].append(r)
    return {k: _shares(v, keys) for k, v in by.items()}


def summarize(retrieval: list[dict], answers: list[dict], meta: dict) -> dict:
    out = {"meta": meta, "retrieval": {}, "answers": {}}
    for name in dict.fromkeys(r["set"] for r in retrieval):
        per = {}
        for method in dict.fromkeys(r["method"] for r in retrieval if r["set"] == name):
            rows = [r for r in retrieval if r["set"] == name and r["method"] == method]
            fig = _groups(rows, ("top1", "pool", "pick", "as_asked"))
            ms = [r["rewrite_ms"] for r in rows if r["turn"] > 1]
            fig["rewrite_ms"] = {"p50": statistics.median(ms) if ms else 0.0,
                                 "max": max(ms, default=0.0)}
            per[method] = fig
        out["retrieval"][name] = per
    for name in dict.fromkeys(r["set"] for r in answers):
        out["answers"][name] = _groups([r for r in answers if r["set"] == name],
                                       ("right", "evidence"))
    return out


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def to_markdown(result: dict) -> str:
    meta = result["meta"]
    lines = []
    for name, per in result["retrieval"].items():
        some = next(iter(per.values()))
        counts = ", ".join(f"turn {b}: {some.get(b, {}).get('n', 0)}" for b in BUCKETS)
        tc = some.get("topic change", {}).get("n", 0)
        lines += [f"### {name}: the right document first, by turn ({counts}; {tc} topic "
                  "changes)", "",
                  "| searched as | turn 1 | 2 | 3 | 4+ | 2+ draft's chunk | 2+ top "
                  f"{meta['draft_pool']} | 2+ held-out half | topic change as asked | "
                  "rewrite p50 |", "|---|---|---|---|---|---|---|---|---|---|"]
        for method, fig in per.items():
            cell = lambda b, k="top1": _pct(fig.get(b, {}).get(k))  # noqa: E731
            label = f"**{method}** (default)" if method == meta.get("default") else method
            lines.append(f"| {label} | " + " | ".join(cell(b) for b in BUCKETS)
                         + f" | {cell('2+', 'pick')} | {cell('2+', 'pool')} | "
                         f"{cell('2+ held-out')} | {cell('topic change', 'as_asked')} | "
                         f"{fig['rewrite_ms']['p50']:.2f} ms |")
        lines.append("")
    for name, fig in result["answers"].items():
        lines += [f"### {name}: answered by the draft (draft-only, its own answers as the "
                  "history)", "", "| turn | n | right | draft's chunk from the right document "
                  "| p50 |", "|---|---|---|---|---|"]
        for b in BUCKETS + ("2+", "topic change"):
            if b in fig:
                f = fig[b]
                lines.append(f"| {b} | {f['n']} | {_pct(f['right'])} | {_pct(f['evidence'])} | "
                             f"{(f.get('p50_ms') or 0) / 1000:.1f} s |")
        lines.append("")
    return "\n".join(lines)
