import os, sys, time, statistics
sys.path.insert(0, "/work/main/benchmarks")
import psutil
from harness_vs_plain import BATCH, SIZE, PlainFiles, raw_collate
from torch.utils.data import DataLoader
from dataperf import backends
from dataperf.data import resolve
from dataperf.measure import cache, trial as T
from dataperf.results import LoaderConfig
data = resolve("/tmp/gcc/data"); paths = data.urls()
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=SIZE, decode=False, shuffle=False)
E = int(sys.argv[2]) if len(sys.argv) > 2 else 40
opts = T.TrialOptions(repeats=E, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
batches, _ = backends.get("files").make(data, cfg, opts)
plain = DataLoader(PlainFiles(paths, False), batch_size=BATCH, num_workers=0, collate_fn=raw_collate)
N = E * len(paths)
os.sched_setaffinity(0, {1})
print("tasks", len(os.listdir("/proc/self/task")))
def bare():
    s = 0.0
    for _ in range(E):
        t0 = time.perf_counter()
        for _b in batches: pass
        s += time.perf_counter() - t0
    return s / N * 1e6
def plain_epochs():
    s = 0.0
    for _ in range(E):
        t0 = time.perf_counter()
        for _b in plain: pass
        s += time.perf_counter() - t0
    return s / N * 1e6
def by_hand():
    t0 = time.perf_counter()
    for _ in range(E):
        for _b in plain: pass
    return (time.perf_counter() - t0) / N * 1e6
def rep(between=None):
    def f():
        s = 0.0
        for _ in range(E):
            s += T.time_repeat(batches, None).wall_s
            if between: between()
        return s / N * 1e6
    return f
def trial(stall=T.TrialOptions.stall_s):
    def f():
        r = T.run_trial(data, cfg, T.TrialOptions(repeats=E, warmup_batches=0, repeat_seconds=None, collect=False,
                                                  footprint=False, stall_s=stall))
        return sum(r.repeat_s) / sum(r.repeat_samples) * 1e6
    return f
run = {"plain": by_hand, "plain_epochs": plain_epochs, "bare": bare, "repeat": rep(), "repeat_between": rep(lambda: (psutil.net_io_counters(), cache.tree_read_bytes(), cache.tree_read_bytes())),
       "trial": trial(), }
for f in run.values(): f()
rows = {k: [] for k in run}
for r in range(int(sys.argv[1])):
    ks = list(run); ks = ks[r % len(ks):] + ks[:r % len(ks)]
    for k in ks: rows[k].append(run[k]())
print(" ".join(f"{k} {statistics.median(v):.3f}" for k, v in rows.items()))
print(" ".join(f"{k} {statistics.median(a/b for a, b in zip(rows['plain'], v)):.3f}" for k, v in rows.items()))
