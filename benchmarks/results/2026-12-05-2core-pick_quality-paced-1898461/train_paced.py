"""A plain training loop as a user writes it (pick_quality scenario paced): a torch DataLoader over the
scenario's data feeding its model for 60 optimizer steps. Written by benchmarks/pick_quality.py for
`dataperf watch`."""
import torch
from torch.utils.data import DataLoader

from dataperf.measure.models import load_model, loss_of


def dataset():
    from paced import sleep_map

    return sleep_map()


def main() -> None:
    device = torch.device('cpu')
    loader = DataLoader(dataset(), batch_size=8, num_workers=2, shuffle=True, pin_memory=False)
    model = load_model('paced:fixed_step_model').to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = 0
    while steps < 60:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, torch.bfloat16, enabled=False):
                loss = loss_of(model(x), x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            if steps == 60:
                break


if __name__ == "__main__":
    main()
