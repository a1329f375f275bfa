import os, sys, time
sys.path.insert(0, "/work/main/benchmarks")
from harness_vs_plain import BATCH, SIZE, PlainFiles, raw_collate
from torch.utils.data import DataLoader
from dataperf import backends
from dataperf.data import resolve
from dataperf.measure import trial as T
from dataperf.results import LoaderConfig
data = resolve("/tmp/gcc/data"); paths = data.urls()
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=SIZE, decode=False, shuffle=False)
opts = T.TrialOptions(repeats=3, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
batches, _ = backends.get("files").make(data, cfg, opts)
plain = DataLoader(PlainFiles(paths, False), batch_size=BATCH, num_workers=0, collate_fn=raw_collate)
E = int(sys.argv[2])
mode = sys.argv[1]
def run(e):
    for _ in range(e):
        if mode == "plain":
            for _b in plain: pass
        elif mode == "bare":
            for _b in batches: pass
        elif mode == "repeat":
            T.time_repeat(batches, None)
run(2)
run(E)
