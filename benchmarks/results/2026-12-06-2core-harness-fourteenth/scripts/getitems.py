"""Decode on, W workers: the plain loop (read+decode a sample at a time) against the same Dataset with a
__getitems__ that reads a batch's files first, then decodes them (as dataperf's FilesDataset does), and dataperf."""
import io, sys, time, json
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from pathlib import Path
import numpy as np, torch
from PIL import Image
from torch.utils.data import DataLoader
from dataperf.data import resolve
data = resolve("/tmp/h30/data"); paths = data.urls()
W = int(sys.argv[1]); N = int(sys.argv[2]); E = int(sys.argv[3])
class Batched(h.PlainFiles):
    def __getitems__(self, idx):
        bs = []
        for i in idx:
            with open(self.paths[i], "rb") as f:
                bs.append(f.read())
        out = []
        for b in bs:
            img = Image.open(io.BytesIO(b)).convert("RGB").resize((32, 32), Image.BILINEAR)
            out.append((torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1), 0))
        return out
def timed(cls):
    loader = DataLoader(cls(paths, True), batch_size=64, num_workers=W)
    n = 0; t0 = time.perf_counter()
    for _ in range(E):
        for b in loader: n += len(b[1])
    return n / (time.perf_counter() - t0)
res = {"plain": [], "batched": [], "dataperf": []}
for k in range(N):
    order = ["plain", "batched", "dataperf"]
    if k % 2: order.reverse()
    for who in order:
        if who == "plain": r = timed(h.PlainFiles)
        elif who == "batched": r = timed(Batched)
        else:
            n, s, _ = h.dataperf_timed(data, W, True, E); r = n / s
        res[who].append(r)
import statistics as st
for who, v in res.items(): print(who, round(st.median(v)), [round(x) for x in v])
print("batched/plain", round(st.median(b / p for b, p in zip(res["batched"], res["plain"])), 3),
      "dataperf/plain", round(st.median(d / p for d, p in zip(res["dataperf"], res["plain"])), 3),
      "dataperf/batched", round(st.median(d / b for d, b in zip(res["dataperf"], res["batched"])), 3))
