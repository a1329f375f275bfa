import gc, sys, collections, traceback
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from dataperf.data import resolve
data = resolve("/tmp/h30/data"); paths = data.urls()
W = int(sys.argv[1]); which = sys.argv[2]
where = collections.Counter()
def cb(phase, info):
    if phase == "start":
        st = traceback.extract_stack()[:-1]
        key = " <- ".join(f"{f.filename.split('/')[-1]}:{f.name}:{f.lineno}" for f in st[-5:][::-1])
        where[(info["generation"], key)] += 1
gc.callbacks.append(cb)
for _ in range(40):
    if which == "plain": h.plain_timed(paths, W, False, 2)
    else: h.dataperf_timed(data, W, False, 2)
for k, v in where.most_common(30): print(v, k)
