"""Documents in: parse (``parsers``; Markdown and HTML structure in ``markup``), cut into
chunks (``chunker``), store them in Chroma with a two-phase commit (``ingestor``).

Deliberately not here: embedding and the store itself (``retrieval``).
"""
