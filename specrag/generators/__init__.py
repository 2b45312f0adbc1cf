"""Text generation backends behind one small Protocol, picked by name from a registry."""

from .base import Generator, GenerationError, Usage, collect, make_generator, register

__all__ = ["Generator", "GenerationError", "Usage", "collect", "make_generator", "register"]
