import sys, time, statistics
sys.path.insert(0, "benchmarks")
from pathlib import Path
import torch
from torch.utils.data import DataLoader
import harness_vs_plain as h
from dataperf.data import resolve
from dataperf.backends.dataloader import make_loader, FilesDataset, collate
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig
data = resolve("/tmp/hv/data"); paths = data.urls()
for p in paths: Path(p).read_bytes()
cfg = LoaderConfig(backend="files", batch_size=64, num_workers=0, image_size=32, decode=False, shuffle=False).explicit()
def loop(dl, epochs=50):
    n = 0; t0 = time.perf_counter()
    for _ in range(epochs):
        for b in dl: n += b["n"]
    return n / (time.perf_counter() - t0)
ours = make_loader(data, cfg, TrialOptions())
seq = DataLoader(FilesDataset(data, cfg, TrialOptions()), batch_size=64, collate_fn=collate)
res = {k: [] for k in "plain ours_loader seq_sampler trial".split()}
for k in range(5):
    res["plain"].append(h.plain_rate(paths, 0, False, 50))
    res["ours_loader"].append(loop(ours))
    res["seq_sampler"].append(loop(seq))
    res["trial"].append(h.dataperf_rate(data, 0, False, 50)[0])
p = statistics.median(res["plain"])
for k, v in res.items():
    print(f"{k:12s} median {statistics.median(v):9.0f}  ratio to plain {statistics.median(v)/p:.3f}")
