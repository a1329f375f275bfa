"""Known-answer check of the steady rate with few batches per worker: samples sleep S, so W workers give W/S."""
import sys, statistics
from dataperf.formats.generate import ImageSpec, write_dataset
from dataperf.records import LoaderConfig
from dataperf.runner import TrialOptions, run_trial
from pathlib import Path
root = Path("/tmp/est-data")
if not root.exists():
    write_dataset(root, "image", "webdataset", 6400, seed=1, image=ImageSpec(16, 16, 80), shard_mb=0.05)
S = 0.02
W = int(sys.argv[1])
for per_worker in (3, 6, 12):
    cfg = LoaderConfig(format="webdataset", batch_size=8, num_workers=W, decode=False, shuffle=False)
    opts = TrialOptions(repeats=3, max_batches=per_worker * W, repeat_seconds=None, sample_cost_s=S, collect=False, footprint=False)
    r = run_trial(root, cfg, opts)
    print(f"W={W} batches/worker={per_worker}: steady {r.samples_per_s_median:.0f} (truth {W / S:.0f}, x{r.samples_per_s_median / (W / S):.2f}) "
          f"repeats {[round(x) for x in r.samples_per_s_repeats]} epoch {r.epoch_samples_per_s_median:.0f} active {r.active_workers} {r.status} {r.error or ''}", flush=True)
