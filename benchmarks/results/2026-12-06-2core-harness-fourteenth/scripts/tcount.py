import gc, sys, tempfile, os
from pathlib import Path
from dataperf.data import resolve
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig
d = Path(tempfile.mkdtemp())
for i in range(3000):
    (d / f"{i:05d}.jpg").write_bytes(b"x" * 100)
data = resolve(str(d))
cfg = LoaderConfig(backend="files", batch_size=64, num_workers=0, decode=False, shuffle=False)
opts = TrialOptions(repeats=1, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
n = [0]
def cb(phase, info):
    if phase == "start" and info["generation"] == 0: n[0] += 1
for k in range(3):
    n[0] = 0
    gc.callbacks.append(cb)
    r = run_trial(data, cfg, opts)
    gc.callbacks.remove(cb)
    print(k, r.status, r.error, "gen0 collections", n[0], r.repeat_samples)
