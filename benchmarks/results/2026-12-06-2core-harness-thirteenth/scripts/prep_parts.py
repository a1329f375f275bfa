import os, sys, time, statistics
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from pathlib import Path
from dataperf.data import resolve
from dataperf.measure import cache
data = resolve("/tmp/gcc/data"); paths = data.urls(); files = [Path(p) for p in paths]
B = 10
def plain(before):
    def f():
        n = s = 0
        for _ in range(B):
            before()
            a, b = h.plain_timed(paths, 0, False, 2); n += a; s += b
        return s / n * 1e6
    return f
run = {"none": plain(lambda: None), "preread": plain(lambda: cache.preread(files)),
       "resident": plain(lambda: cache.resident_bytes(files)), "file_bytes": plain(lambda: cache.file_bytes(files)),
       "both": plain(lambda: (cache.prepare(files, "warm"), cache.warm_resident(files)))}
for f in run.values(): f()
rows = {k: [] for k in run}
for r in range(int(sys.argv[1])):
    ks = list(run); ks = ks[r % len(ks):] + ks[:r % len(ks)]
    for k in ks: rows[k].append(run[k]())
print(" ".join(f"{k} {statistics.median(v):.3f}" for k, v in rows.items()))
print(" ".join(f"{k} {statistics.median(a/b for a, b in zip(rows['none'], v)):.3f}" for k, v in rows.items()))
