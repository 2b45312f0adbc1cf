"""The sample knowledge base lives in ``specrag.ingest.sample`` (the benchmarks use it too,
and sit below the UI); this name is the same module, for existing callers."""

import sys

from specrag.ingest import sample

sys.modules[__name__] = sample
