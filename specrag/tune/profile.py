"""A collection's tuned profile lives in ``specrag.pipeline.profile`` (the engine reads it,
and the engine sits below ``tune``); this name is the same module, for existing callers."""

import sys

from specrag.pipeline import profile

sys.modules[__name__] = profile
