"""Moved to ``specrag.datasets.counterfactual`` (the benchmarks read these sets too, and sit below
the training); this name is the same module, for existing callers."""

import sys

from specrag.datasets import counterfactual

sys.modules[__name__] = counterfactual
