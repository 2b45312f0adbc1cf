"""Self-tuning on a collection's own documents (``specrag tune``).

``questions`` writes questions from the collection's chunks, ``collect`` answers them
through the served engine (heavy-only: the reference; draft-only: the label), ``fit``
calibrates acceptance and the router on a training split and replays the held-out
split, ``profile`` keeps the per-collection settings the engine applies, and ``run``
strings the steps together, resumably, with a report.

Deliberately not here: draft distillation (fine-tuning the draft model on the
references); ``specrag tune --steps distill`` says so instead of pretending.
"""
