"""Finding the chunks for a question: the int8 bi-encoder (``embedder``, exported by
``onnx_export``), the Chroma store (``store``), top-k search (``retriever``) and rank
fusion (``fusion``).

Deliberately not here: reranking with a cross-encoder (``grounding.crossencoder``, which
the engine calls) and parsing documents (``ingest``).
"""
