"""Moved to ``specrag.datasets.pairs`` (the benchmarks read these sets too, and sit below
the training); this name is the same module, for existing callers."""

import sys

from specrag.datasets import pairs

sys.modules[__name__] = pairs
