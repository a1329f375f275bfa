import os, sys, time, statistics
sys.path.insert(0, "/work/main/benchmarks")
import psutil
from harness_vs_plain import BATCH, SIZE
from dataperf import backends
from dataperf.data import resolve
from dataperf.measure import cache, trial as T
from dataperf.measure import footprint
from dataperf.results import LoaderConfig
data = resolve("/tmp/gcc/data")
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=SIZE, decode=False, shuffle=False)
opts = T.TrialOptions(repeats=3, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
batches, _ = backends.get("files").make(data, cfg, opts)
os.sched_setaffinity(0, {1})
E = 40; N = E * 2000
def ep(between):
    def f():
        s = 0.0
        for _ in range(E):
            t0 = time.perf_counter()
            for _b in batches: pass
            s += time.perf_counter() - t0
            between()
        return s / N * 1e6
    return f
pid = os.getpid()
run = {"none": ep(lambda: None), "net_io": ep(psutil.net_io_counters), "tree_read": ep(lambda: (cache.tree_read_bytes(), cache.tree_read_bytes())),
       "self_io": ep(lambda: (cache._read_bytes(pid), cache._read_bytes(pid))), "children": ep(lambda: (footprint.children(pid), footprint.children(pid))),
       "sleep100us": ep(lambda: time.sleep(0.0001))}
for f in run.values(): f()
rows = {k: [] for k in run}
for r in range(int(sys.argv[1])):
    ks = list(run); ks = ks[r % len(ks):] + ks[:r % len(ks)]
    for k in ks: rows[k].append(run[k]())
print(" ".join(f"{k} {statistics.median(v):.3f}" for k, v in rows.items()))
print(" ".join(f"{k} {statistics.median(a/b for a, b in zip(rows['none'], v)):.3f}" for k, v in rows.items()))
