"""A plain training loop as a user writes it (pick_quality scenario imagenet): a torch DataLoader over the
scenario's data feeding its model for 80 optimizer steps. Written by benchmarks/pick_quality.py for
`dataperf watch`."""
import torch
from torch.utils.data import DataLoader

from dataperf.models import load_model, loss_of


def dataset():
    from torchvision import datasets, transforms

    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    return datasets.ImageFolder('/tmp/pick_quality/imagefolder', t)


def main() -> None:
    device = torch.device('cuda')
    loader = DataLoader(dataset(), batch_size=256, num_workers=4, shuffle=True, pin_memory=True)
    model = load_model('torchvision.models:resnet50').to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = 0
    while steps < 80:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, torch.bfloat16, enabled=False):
                loss = loss_of(model(x), x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            if steps == 80:
                break


if __name__ == "__main__":
    main()
