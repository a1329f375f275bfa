"""Garbage collections inside each side's timed windows, harness_vs_plain's paired blocks (raw, 0 workers)."""
import gc
import sys
import time

sys.path.insert(0, "/work/next/benchmarks")
import harness_vs_plain as h  # noqa: E402
import dataperf.measure.trial as T  # noqa: E402
from dataperf.data import resolve  # noqa: E402

data = resolve("/tmp/h30/data")
paths = data.urls()
side = [None]
got = {s: {"n": [0, 0, 0], "s": [0.0, 0.0, 0.0], "win_s": 0.0} for s in ("plain", "dataperf")}
t_gc = [0.0]


def cb(phase, info):
    if side[0] is None:
        return
    if phase == "start":
        t_gc[0] = time.perf_counter()
    else:
        g = info["generation"]
        got[side[0]]["n"][g] += 1
        got[side[0]]["s"][g] += time.perf_counter() - t_gc[0]


gc.callbacks.append(cb)
orig = T.time_repeat


def timed_repeat(*a, **k):
    side[0] = "dataperf"
    t = time.perf_counter()
    try:
        return orig(*a, **k)
    finally:
        got["dataperf"]["win_s"] += time.perf_counter() - t
        side[0] = None


T.time_repeat = timed_repeat
for k in range(int(sys.argv[1])):
    for _ in range(40):  # one round's worth of blocks of 2 epochs a side
        side[0] = "plain"
        t = time.perf_counter()
        h.plain_timed(paths, 0, False, 2)
        got["plain"]["win_s"] += time.perf_counter() - t
        side[0] = None
        h.dataperf_timed(data, 0, False, 2)
for s, d in got.items():
    print(f"{s}: windows {d['win_s']:.2f} s; collections gen0/1/2 {d['n']}, seconds {[round(x, 4) for x in d['s']]}, "
          f"{sum(d['s']) / d['win_s'] * 100:.2f}% of window time")
print("gc objects tracked:", len(gc.get_objects()), "thresholds", gc.get_threshold())
