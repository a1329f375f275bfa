import gc, sys, collections, traceback
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
import dataperf.measure.trial as T
from dataperf.data import resolve
data = resolve("/tmp/gcc/data"); paths = data.urls()
on = [False]; where = collections.Counter()
def cb(phase, info):
    if phase == "start" and on[0]:
        st = traceback.extract_stack()[:-1]
        key = " <- ".join(f"{f.name}:{f.lineno}" for f in st[-6:][::-1])
        where[(info["generation"], key)] += 1
gc.callbacks.append(cb)
orig = T.time_repeat
def tr(*a, **k):
    on[0] = True
    try: return orig(*a, **k)
    finally: on[0] = False
T.time_repeat = tr
for _ in range(80):
    h.plain_timed(paths, 0, False, 2)
    h.dataperf_timed(data, 0, False, 2)
for k, v in where.most_common(25): print(v, k)
