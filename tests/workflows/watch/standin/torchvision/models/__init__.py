from torchvision.models.resnet import ResNet, resnet18, tinynet

__all__ = ["ResNet", "resnet18", "tinynet"]
