from torchvision.datasets.folder import ImageFolder

__all__ = ["ImageFolder"]
