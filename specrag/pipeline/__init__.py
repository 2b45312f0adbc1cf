"""One question's pipeline: the engine (``engine``) and its events (``events``), prompts
(``prompts``), costs (``costs``), the front door (``service``), and ``build``, the one
place that turns ``Settings`` into all of it.

Deliberately not here: what each stage's model does (``retrieval``, ``generators``,
``grounding``) and rendering (``cli``, ``ui``).
"""
