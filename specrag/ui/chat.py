"""Draw one question's engine events as HTML: the draft, its verdict, the heavy answer.

``render_turn(turn)`` draws one question's ``Turn`` (``ui.turn``: its events folded) as
it stands: the draft streams marked "draft · verifying"; the verdict adds the grounding
score against its threshold, whether the draft answers the question and P(right) against
its bar (when the acceptance model is on), and one row per draft sentence, coloured
supported / unsupported, whose supporting chunk shows on hover (``title``) and on expand
(``<details>``); an accepted draft is marked accepted; on rejection the heavy answer
streams in a second column beside the draft and is marked as the answer, with its own
verdict (supported by the documents, or not). Beside the verdict of the card that is the
answer: what a follow-up was searched as and, with the ``final`` event, the documents the
answer came from (``ui.answer_html.facts_html``); then citations (source, page, chunk
text) and a timing/cost line. Each citation, source and sentence's supporting chunk
carries a "view source" button (``data-chunk``, ``data-collection``) that ``ui.viewer``
opens. Every document or answer text goes through ``html.escape``: documents may contain
markup, and none of it may reach the page as markup.

Pure functions: no Gradio, no engine calls, no decisions the engine makes (tier,
acceptance, citations all come from its events).
"""

from __future__ import annotations

import re
from html import escape

from specrag.grounding.text import CITATION
from specrag.ui.answer_html import citations_html, facts_html, meta_line, warnings_html
from specrag.ui.answer_html import open_source as _open_source
from specrag.ui.answer_html import text_html as _text
from specrag.ui.answer_html import where_html as _where
from specrag.ui.turn import Turn


# -- pieces ---------------------------------------------------------------------------
def _verify_chunks(turn: Turn) -> tuple:
    # best_chunk indexes Answer.verify_chunks, which only arrives with ``final``; until
    # then the verifier's chunks are the head of the retrieved list, in the same order
    if turn.answer is not None and turn.answer.verify_chunks:
        return turn.answer.verify_chunks
    return tuple(h.chunk for h in turn.hits)


def verdict_html(turn: Turn) -> str:
    v = turn.verdict
    if v is None:
        return ('<div class="sr-verdict sr-pending"><span class="sr-spinner"></span>'
                "checking each sentence against the documents…</div>") \
            if turn.stage == "verifying" else ""
    chunks = _verify_chunks(turn)
    grounded = float(v.grounding)
    pct = max(0.0, min(1.0, grounded)) * 100
    mark = max(0.0, min(1.0, float(v.threshold))) * 100
    ok = "pass" if v.accepted else "fail"
    g_ok = grounded >= v.threshold
    relevance = getattr(v, "relevance", None)
    # with the acceptance model, P(right) decides, not either part alone: shown as the CLI does
    right_ok = v.score >= (v.answer_threshold or 0)
    answers = "" if relevance is None else (
        f' · <span class="sr-relevance sr-{"pass" if right_ok else "fail"}">'
        f"answers the question {relevance:.2f}</span>"
        f' · <span class="sr-pright sr-{"pass" if right_ok else "fail"}">P(right) {v.score:.2f} '
        f'{"≥" if right_ok else "<"} {v.answer_threshold or 0:.2f}</span>')
    head = (f'<div class="sr-score-line"><span class="sr-score sr-{ok}">grounded {grounded:.2f}</span> '
            f'<span class="sr-vs">{"≥" if g_ok else "<"}</span> '
            f'<span class="sr-threshold">{v.threshold:.2f}</span>{answers}'
            f'<span class="sr-agg"> · {escape(str(v.aggregate))} over '
            f'{len(v.sentences)} sentence{"s" * (len(v.sentences) != 1)}</span></div>'
            f'<div class="sr-meter" aria-hidden="true"><span class="sr-{ok}" '
            f'style="width:{pct:.0f}%"></span><i style="left:{mark:.0f}%"></i></div>')
    rows = []
    for s in v.sentences:
        if s.abstention:
            cls, icon, label = "abstains", "–", "abstains"
        elif s.score >= v.threshold:
            cls, icon, label = "supported", "✓", f"{s.score:.2f}"
        else:
            cls, icon, label = "unsupported", "✗", f"{s.score:.2f}"
        chunk = chunks[s.best_chunk] if s.best_chunk is not None and s.best_chunk < len(chunks) \
            else None
        if chunk is None:
            support = '<p class="sr-none">no supporting passage</p>'
            hover = "no supporting passage"
        else:
            support = (f'<cite>{_where(chunk.source, chunk.page)}</cite>'
                       f'<blockquote>{_text(chunk.text)}</blockquote>'
                       f"{_open_source(chunk.id, chunk.collection)}")
            hover = f"{chunk.source}: {' '.join(chunk.text.split())[:400]}"
        rows.append(f'<li class="sr-sent sr-{cls}"><details><summary title="{escape(hover)}">'
                    f'<span class="sr-icon">{icon}</span><span class="sr-sscore">{label}</span> '
                    f'{escape(s.sentence)}</summary><div class="sr-support">{support}</div>'
                    f"</details></li>")
    return f'<div class="sr-verdict">{head}<ol class="sr-sentences">{"".join(rows)}</ol></div>'


def heavy_support_html(turn: Turn) -> str:
    """Under the heavy answer: is it supported by the documents (the engine's verdict)?"""
    v = turn.heavy_verdict
    if v is None or getattr(v, "abstained", False):
        return ""
    note = turn.answer.support_note if turn.answer is not None else ""
    grounded = float(v.grounding)
    if note:
        return f'<div class="sr-support-note sr-fail">⚠ {escape(note)}</div>'
    return (f'<div class="sr-support-note sr-pass">supported by the documents '
            f"(grounded {grounded:.2f})</div>")


def _draft_badge(turn: Turn) -> tuple[str, str]:
    stage, v = turn.stage, turn.verdict
    if turn.draft_error:
        return "draft · failed", "rejected"
    if stage in ("retrieving", "drafting", "verifying"):
        return "draft · verifying", "pending"
    if _withheld(turn):
        return "draft · withheld", "rejected"  # it obeyed an instruction in a document
    if stage == "accepted":
        return "draft · accepted", "accepted"
    if turn.answer is not None and turn.answer.early_rejected is not None:
        return "draft · stopped early", "rejected"  # a sentence ruled it out mid-stream
    if v is not None and getattr(v, "abstained", False):
        return "draft · abstained", "pending"
    if stage == "unverified":
        return "draft · below threshold", "rejected"  # draft-only: kept anyway
    return "draft · rejected", "rejected"


def _card(kind: str, badge: str, badge_cls: str, model: str, body: str, streaming: bool,
          final: bool, extra: str = "") -> str:
    caret = '<span class="sr-caret">▍</span>' if streaming else ""
    answer_tag = '<span class="sr-answer-tag">answer</span>' if final else ""
    model_tag = f'<span class="sr-model">{escape(model)}</span>' if model else ""
    return (f'<section class="sr-card sr-{kind}{" sr-final" if final else ""}">'
            f'<header><span class="sr-badge sr-b-{badge_cls}">{escape(badge)}</span>'
            f"{model_tag}{answer_tag}</header>"
            f'<div class="sr-text">{body}{caret}</div>{extra}</section>')


# -- the turn ---------------------------------------------------------------------------
def render_turn(turn: Turn) -> str:
    stage = turn.stage
    cards = []
    done = turn.answer is not None
    has_draft = bool(turn.draft or turn.draft_error) or stage in ("drafting", "verifying") or (
        done and turn.answer.draft is not None)
    heavy_only = done and turn.answer.draft is None and turn.answer.tier == "heavy"
    # the answer's facts sit with the verdict of the card that is (or will be) the answer
    on_heavy = heavy_only or (done and turn.answer.tier == "heavy") or (
        turn.escalated and not done)
    facts = facts_html(turn) if stage != "retrieving" else ""
    if stage == "retrieving":
        note = escape(turn.note or "retrieving passages…")
        cards.append('<section class="sr-card sr-draft"><div class="sr-text sr-muted">'
                     f'<span class="sr-spinner"></span>{note}</div></section>')
    elif has_draft and not heavy_only:
        badge, cls = _draft_badge(turn)
        final = done and turn.answer.tier == "draft"
        failed = (f'<p class="sr-draft-error">{escape(turn.draft_error)}</p>'
                  if turn.draft_error else "")
        text = turn.answer.text if final and _withheld(turn) else turn.draft
        shown = _marked(text, turn.checked) if turn.verdict is None else _text(text)
        cards.append(_card("draft", badge, cls, turn.draft_model, shown + failed,
                           stage == "drafting" and not failed, final,
                           verdict_html(turn) + ("" if on_heavy else facts)))
    if turn.escalated or heavy_only or (done and turn.answer.tier == "heavy"):
        heavy = turn.answer.text if done and _withheld(turn) else turn.heavy
        body = _text(heavy) if heavy else (
            '<span class="sr-muted"><span class="sr-spinner"></span>'
            "reranking passages for the heavy model…</span>")
        label = "heavy · answer" if done else "heavy · writing"
        cards.append(_card("heavy", label, "heavy", turn.heavy_model, body,
                           not done and bool(turn.heavy), done,
                           heavy_support_html(turn) + (facts if on_heavy else "")))
    if stage == "empty" and not cards:
        cards.append(_card("draft", "no passages", "rejected", "", _text(turn.answer.text),
                           False, True, facts))
    route = (f'<div class="sr-route" data-route="{escape(turn.route.route)}">'
             f"{escape(turn.route.label)}</div>" if turn.route is not None else "")
    cols = " sr-two" if len(cards) == 2 else ""
    link = ('<div class="sr-link" aria-hidden="true">→</div>' if len(cards) == 2 else "")
    body = link.join(cards)
    error = f'<div class="sr-error">{escape(turn.error)}</div>' if turn.error else ""
    return (f'<article class="sr-turn" data-state="{stage}">'
            f'<div class="sr-q"><span class="sr-who">You</span>{escape(turn.question)}</div>'
            f'{route}<div class="sr-answers{cols}">{body}</div>{error}'
            f"{warnings_html(turn.answer)}{citations_html(turn.answer)}"
            f"{meta_line(turn.answer)}</article>")


# the citations (``grounding.text.CITATION``, as the verifier strips them) and full stop
# that follow a checked sentence's words in the draft
_TAIL = re.compile(f"(?:{CITATION.pattern})*[.!?]?", CITATION.flags)


def _marked(text: str, checked: list) -> str:
    """The streaming draft with each sentence verified so far coloured (the whole
    verdict replaces this once the draft ends)."""
    out = _text(text)
    for sentence, passed in checked:
        # the verifier saw the sentence without its citations: find its words, then take
        # the citations and the full stop that follow them in the draft
        core = _text(sentence.rstrip(".!?"))
        at = out.find(core) if core else -1
        if at < 0:
            continue
        end = _TAIL.match(out, at + len(core)).end()
        out = (f'{out[:at]}<span class="sr-live sr-{"pass" if passed else "fail"}" '
               f'title="checked while drafting">{out[at:end]}</span>{out[end:]}')
    return out


def _withheld(turn: Turn) -> bool:
    """The engine withheld what the model wrote (it obeyed an instruction in a document):
    the final card shows the engine's answer, not the streamed text."""
    a = turn.answer
    return a is not None and bool(a.warnings) and a.text != (
        turn.heavy if a.tier == "heavy" else turn.draft)


EMPTY = ('<div class="sr-empty"><p>Ask a question about the documents in the selected '
         "collection. A small model drafts an answer at once; a verifier checks every "
         "sentence against the documents; only a rejected draft goes to the heavy model."
         "</p></div>")


def render_conversation(done_html: list[str], live: Turn | None = None) -> str:
    parts = list(done_html) + ([render_turn(live)] if live is not None else [])
    return '<div class="sr-chat">' + ("".join(parts) or EMPTY) + "</div>"
