"""The tune's report: ``report.json``, ``report.md`` and ``report.html`` (plotly bars).

Rows: ``heavy_only`` (for scale), ``before`` (the untuned defaults), one per step that
ran, and ``after`` (what the collection now runs with), each on the held-out split.

Deliberately not here: computing the blocks (``tune.fit``).
"""

from __future__ import annotations

import json
from pathlib import Path

from specrag.bench.e2e_report import _fmt, html_page

ROWS = ("heavy_only", "before", "calibrate", "router", "distill", "after")


def _budget(b: dict) -> str:
    if b.get("max_cost_usd") is None:
        return ""
    text = f" of a ${b['max_cost_usd']:.2f} cap"
    if b.get("reached"):
        text += f" (reached: {b['answered']} of {b['asked']} questions answered)"
    return text


def to_markdown(r: dict) -> str:
    lines = [f"# Tune of collection `{r['collection']}`", "",
             f"Questions: {r['questions']['train']} train, {r['questions']['held_out']} held out. "
             f"Heavy tier {r['heavy']}, draft {r['draft']}. Cost ${r['cost_usd']:.4f}"
             f"{_budget(r.get('budget') or {})}.", "",
             "| held out | acceptance | accepted precision | correct | final p50 ms | heavy tokens |",
             "|---|---|---|---|---|---|"]
    for name in ROWS:
        b = r.get(name)
        if not b:
            continue
        if "skipped" in b:
            lines.append(f"| {name} | skipped: {b['skipped']} | | | | |")
            continue
        lines.append(f"| {name} | {_fmt(b['acceptance_rate'], True)} | "
                     f"{_fmt(b['accepted_precision'], True)} | {_fmt(b['correct'], True)} | "
                     f"{_fmt(b['total_p50_ms'])} | {_fmt(b['heavy_tokens'])} |")
    d = r.get("distill") or {}
    if d.get("examples") is not None:
        used = ", ".join(f"{k} {v}" for k, v in sorted(d.get("used", {}).items()))
        lines += ["", f"Distilled draft: {d['examples']} training answers ({used})."]
        if d.get("path"):
            lines[-1] += (f" Answer loss {d['train_loss_before']} -> {d['epoch_loss'][-1]} "
                          f"over {d['epochs']} epochs; held-out reference loss "
                          f"{' -> '.join(str(x) for x in d.get('held_out_loss') or [])} "
                          f"({d.get('held_out_answers', 0)} answers); LoRA rank {d['rank']}, "
                          f"{d['trainable']:,} weights, bf16 {d['bf16']}; {d['size_mb']} MB "
                          f"(base {d['base_size_mb']} MB); seconds {d['seconds']}.")
    if d.get("gave_up"):
        g = d["gave_up"]
        lines += ["", f"Answerable held-out questions the draft gave up on (\"the documents do "
                      f"not say\"): base {g['before']}, distilled {g['distill']}"
                      + (" (so not written: each would escalate)." if d.get("gives_up_more")
                         else ".")]
    if d.get("matched_precision"):
        lines.append("")
    for m in d.get("matched_precision") or []:
        lines.append(f"- At accepted-draft precision {_fmt(m['precision'], True)}: base draft "
                     f"accepts {_fmt(m['before'], True)}, distilled {_fmt(m['distill'], True)}"
                     " (bar on each draft's P(right)).")
    lines += ["", "Settings written: " + (", ".join(f"`{k}` = {v}" for k, v in
                                                    r["settings_written"].items()) or
                                          "none (no step beat the defaults on held-out questions)"),
              "", "Seconds per step: " + ", ".join(f"{k} {v}" for k, v in r["seconds"].items())]
    return "\n".join(lines) + "\n"


def to_html(r: dict) -> str:
    import plotly.graph_objects as go

    names = [n for n in ROWS if r.get(n) and "skipped" not in r[n]]
    figs = []
    for key, title in (("correct", "correct (held out)"), ("total_p50_ms", "final p50 ms"),
                       ("heavy_tokens", "heavy tokens")):
        figs.append(go.Figure(go.Bar(x=names, y=[r[n][key] or 0 for n in names]),
                              layout={"title": title, "height": 320}))
    return html_page(f"specrag tune: {r['collection']}", figs, to_markdown(r))


def write(r: dict, folder: Path) -> None:
    (folder / "report.json").write_text(json.dumps(r, indent=1, default=str), encoding="utf-8")
    (folder / "report.md").write_text(to_markdown(r), encoding="utf-8")
    (folder / "report.html").write_text(to_html(r), encoding="utf-8")
