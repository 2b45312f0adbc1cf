"""Self-tuning on a collection's own documents (``specrag tune``).

``questions`` writes questions from the collection's chunks, ``collect`` answers them
through the served engine (heavy-only: the reference; draft-only: the label), ``fit``
calibrates acceptance and the router on a training split and replays the held-out
split, ``distill`` fine-tunes the draft model on the heavy tier's references (``lora``
in torch, ``gguf_model`` back to a llama.cpp file), ``profile`` keeps the
per-collection settings the engine applies, and ``run`` strings the steps together,
resumably, with a report.

Deliberately not here: the serving path (``pipeline``); a tuned collection is served
through ``profile.view``.
"""
