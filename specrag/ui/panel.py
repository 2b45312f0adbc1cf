"""The Settings tab: a session's policy, threshold, k and chunk counts; models; Claude key.

The controls change only the session that moves them (their values travel with each
question; see ``session.Options``). The models per role are shown read-only, as the
engine has them once loaded and as the settings name them before that. Whether a Claude
key is configured is read from the environment variable that
``settings.anthropic_api_key_env`` names (on a Hugging Face Space: a Space secret); the
key itself is never read into the page.

Deliberately not here: changing the app-wide settings or models (``specrag config``,
``SPECRAG_*`` variables), applying the options (``session.Engines.view``).
"""

from __future__ import annotations

import os

from specrag import sources
from specrag.pipeline.events import POLICIES

POLICY_HELP = {
    "lazy": "draft first; rerank and heavy only after a rejection (cheapest)",
    "eager": "rerank and heavy start with the draft, cancelled on acceptance (fastest)",
    "draft-only": "baseline: always the draft, verified but never escalated",
    "heavy-only": "baseline: always the heavy model, no draft",
}


def model_rows(settings, loaded: dict[str, str]) -> list[list[str]]:
    """[role, model, where it comes from] for every role."""
    g = settings.generation
    embedder = _short(sources.source_for("embedder", settings))
    rows = [["embedder", f"{settings.embedder.backend}: {embedder}", "models.embedder"]]
    for role in ("draft", "heavy"):
        spec = getattr(g, role)
        name = loaded.get(role) or (spec if ":" in spec else
                                    f"{spec}: {_short(sources.source_for(role, settings))}")
        rows.append([role, name, f"generation.{role}"])
    for role in ("verifier", "reranker"):
        rows.append([role, loaded.get(role) or _short(sources.source_for(role, settings)),
                     f"models.{role}"])
    return rows


def _short(spec: str) -> str:
    """A source string without its checksum and wheel path noise."""
    spec = spec.split("#", 1)[0]
    if spec.startswith("pypi:"):
        return spec.rsplit("/", 1)[-1] + f" ({spec[5:].split('/', 1)[0]})"
    return spec


def claude_status(settings, environ=None) -> str:
    env = os.environ if environ is None else environ
    var = settings.anthropic_api_key_env
    heavy = settings.generation.heavy
    if env.get(var, "").strip():
        if heavy.startswith("anthropic:"):
            return f"✅ Claude key configured (`{var}`); the heavy tier is `{heavy}`."
        return (f"✅ Claude key configured (`{var}`), but the heavy tier is `{heavy}`: set "
                "`SPECRAG_GENERATION__HEAVY=anthropic:claude-sonnet-4-6` to use Claude.")
    return (f"⚪ No Claude key: `{var}` is not set, so the heavy tier runs `{heavy}`. "
            "On a Hugging Face Space, add it under Settings → Secrets.")


def build_tab(settings, engines, gr):
    """The controls, in the order ``session.Options`` takes them."""
    r, v = settings.retrieval, settings.verify
    with gr.Row(equal_height=False):
        with gr.Column(scale=5):
            gr.Markdown("### This session")
            policy = gr.Radio(list(POLICIES), value=settings.generation.policy, label="Policy",
                              info=" · ".join(f"{k}: {h}" for k, h in POLICY_HELP.items()),
                              elem_id="sr-policy")
            threshold = gr.Slider(0.0, 1.0, value=v.threshold, step=0.01,
                                  label="Grounded score to accept a draft (without the "
                                        "acceptance model) and to mark a sentence supported",
                                  elem_id="sr-threshold")
            answer_threshold = gr.Slider(0.0, 1.0, value=v.answer_threshold, step=0.01,
                                         label="P(right) to accept a draft (acceptance model: "
                                               "grounded and answers the question)",
                                         elem_id="sr-answer-threshold")
            top_k = gr.Slider(1, 100, value=r.top_k, step=1, label="k: passages retrieved")
            draft_k = gr.Slider(1, 10, value=r.draft_k, step=1, label="Passages for the draft")
            heavy_k = gr.Slider(1, 20, value=r.heavy_k, step=1,
                                label="Passages for the heavy model")
        with gr.Column(scale=6):
            gr.Markdown("### Models (read-only)")
            models = gr.Dataframe(model_rows(settings, engines.model_names()),
                                  headers=["role", "model", "setting"], interactive=False,
                                  wrap=True, elem_id="sr-models")
            gr.Markdown(claude_status(settings), elem_id="sr-claude")
            gr.Markdown("App-wide settings come from `specrag.yaml` or `SPECRAG_*` variables "
                        "(`specrag config show`); the controls on the left change only your "
                        "session.", elem_classes="sr-help")
    return [policy, threshold, top_k, draft_k, heavy_k, answer_threshold], models
