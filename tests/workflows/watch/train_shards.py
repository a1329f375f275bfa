"""A WebDataset-README-style job (no dataperf import): shards decoded to PIL, batched in the pipeline, a
WebLoader with batch_size=None. Run under `dataperf watch` by test_next_step."""

import sys

import numpy as np
import torch
import webdataset as wds

pattern, batch = sys.argv[1], int(sys.argv[2])


def to_tensor(img):
    return torch.from_numpy(np.asarray(img.resize((16, 16)), dtype=np.float32)).permute(2, 0, 1) / 255


dataset = (wds.WebDataset(pattern, shardshuffle=False).decode("pil").to_tuple("jpg", "cls")
           .map_tuple(to_tensor, int).batched(batch))
loader = wds.WebLoader(dataset, batch_size=None, num_workers=2)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), torch.as_tensor(y) % 10).backward()
    opt.step()
print("trained")
