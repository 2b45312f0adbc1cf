"""Before drafting: will a draft do? The router's features (``features``) and its model and
decision (``router``), used by the ``routed`` policy.

Deliberately not here: training it on e2e rows (``training.router``) and the policies
(``pipeline.engine``).
"""
