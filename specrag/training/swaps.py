"""Moved to ``specrag.datasets.swaps`` (the benchmarks read these sets too, and sit below
the training); this name is the same module, for existing callers."""

import sys

from specrag.datasets import swaps

sys.modules[__name__] = swaps
