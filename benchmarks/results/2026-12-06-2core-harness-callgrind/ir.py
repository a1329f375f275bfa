import sys
sys.path.insert(0, "/work/main/benchmarks")
from pathlib import Path
from harness_vs_plain import PlainFiles, raw_collate, BATCH
from torch.utils.data import DataLoader
from dataperf.data import resolve
from dataperf.measure.trial import TrialOptions, time_repeat
from dataperf.results import LoaderConfig
from dataperf import backends
who, E = sys.argv[1], int(sys.argv[2])
data = resolve("/tmp/h30/data"); paths = data.urls()
plain = DataLoader(PlainFiles(paths, False), batch_size=BATCH, num_workers=0, collate_fn=raw_collate)
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=32, decode=False, shuffle=False)
opts = TrialOptions(repeats=1, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
batches, _ = backends.get("files").make(data, cfg, opts)
for _ in range(E):
    if who == "plain":
        for b in plain: pass
    elif who == "bare":
        for b in batches: pass
    elif who == "repeat":
        time_repeat(batches, None)
