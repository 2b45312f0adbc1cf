"""Training of the distilled cross-encoders (verifier, reranker); see ``specrag train``."""
