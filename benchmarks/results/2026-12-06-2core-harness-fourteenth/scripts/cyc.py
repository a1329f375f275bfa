import gc, sys, collections
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from pathlib import Path
from dataperf.data import resolve
data = resolve("/tmp/h30/data"); paths = data.urls()
W = int(sys.argv[1])
which = sys.argv[2]
def one():
    if which == "plain": h.plain_timed(paths, W, False, 2)
    else: h.dataperf_timed(data, W, False, 2)
one(); one(); gc.collect()
gc.set_debug(gc.DEBUG_SAVEALL)
c0 = gc.get_count()
gc.disable()
one()
c1 = gc.get_count()
gc.collect()
print(which, "W", W, "count before/after", c0, c1, "garbage", len(gc.garbage))
cnt = collections.Counter(type(o).__qualname__ for o in gc.garbage)
print(cnt.most_common(25))
