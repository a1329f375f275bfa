"""A minimal stand-in for torchvision (whose PyPI build does not load beside this CPU torch): the pieces the
watch tests' training scripts use, with torchvision's names, attributes and semantics."""

from torchvision import datasets, models, transforms

__all__ = ["datasets", "models", "transforms"]
