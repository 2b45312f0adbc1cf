"""Moved to ``specrag.datasets.training_sources`` (the benchmarks read these sets too, and sit below
the training); this name is the same module, for existing callers."""

import sys

from specrag.datasets import training_sources

sys.modules[__name__] = training_sources
