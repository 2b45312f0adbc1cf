"""Is the draft supported by the documents? The distilled cross-encoders
(``crossencoder``: the verifier and the reranker), sentence splitting and stop words
(``text``), evidence selection (``evidence``) and the per-sentence ``Verifier``.

Deliberately not here: the acceptance policy around a verdict (``pipeline.engine``) and
training the models (``training``).
"""
