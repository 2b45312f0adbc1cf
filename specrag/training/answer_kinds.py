"""Moved to ``specrag.datasets.answer_kinds`` (the benchmarks read these sets too, and sit below
the training); this name is the same module, for existing callers."""

import sys

from specrag.datasets import answer_kinds

sys.modules[__name__] = answer_kinds
