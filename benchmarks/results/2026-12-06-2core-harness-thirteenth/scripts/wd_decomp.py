import os, sys, time, statistics, threading
sys.path.insert(0, "/work/main/benchmarks")

from harness_vs_plain import BATCH, SIZE, PlainFiles, raw_collate
from torch.utils.data import DataLoader
from dataperf import watchdog
from dataperf.data import resolve
from dataperf.measure import trial as T
from dataperf.results import LoaderConfig
data = resolve("/tmp/gcc/data"); paths = data.urls()
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=SIZE, decode=False, shuffle=False)
E = 40
plain = DataLoader(PlainFiles(paths, False), batch_size=BATCH, num_workers=0, collate_fn=raw_collate)
N = E * len(paths)
os.sched_setaffinity(0, {1})
print("tasks", len(os.listdir("/proc/self/task")))
def by_hand():
    t0 = time.perf_counter()
    for _ in range(E):
        for _b in plain: pass
    return (time.perf_counter() - t0) / N * 1e6
def trial(stall=T.TrialOptions.stall_s):
    r = T.run_trial(data, cfg, T.TrialOptions(repeats=E, warmup_batches=0, repeat_seconds=None, collect=False,
                                              footprint=False, stall_s=stall))
    return sum(r.repeat_s) / sum(r.repeat_samples) * 1e6
class NoThread:
    def __init__(self, *a, **k): pass
    def start(self): pass
    def join(self): pass
def trial_nothread():
    real = watchdog.threading.Thread
    watchdog.threading.Thread = NoThread
    try: return trial()
    finally: watchdog.threading.Thread = real
def trial_nowd_idle():
    ev = threading.Event(); t = threading.Thread(target=ev.wait, daemon=True); t.start()
    try: return trial(None)
    finally: ev.set(); t.join()
def plain_idle():
    ev = threading.Event(); t = threading.Thread(target=ev.wait, args=(60,), daemon=True); t.start()
    try: return by_hand()
    finally: ev.set(); t.join()
run = {"plain": by_hand, "plain_idle": plain_idle, "trial": trial, "trial_nowd": lambda: trial(None),
       "trial_nothread": trial_nothread, "trial_nowd_idle": trial_nowd_idle}
for f in run.values(): f()
rows = {k: [] for k in run}
for r in range(int(sys.argv[1])):
    ks = list(run); ks = ks[r % len(ks):] + ks[:r % len(ks)]
    for k in ks: rows[k].append(run[k]())
print(" ".join(f"{k} {statistics.median(v):.3f}" for k, v in rows.items()))
print(" ".join(f"{k} {statistics.median(a/b for a, b in zip(rows['plain'], v)):.3f}" for k, v in rows.items()))
