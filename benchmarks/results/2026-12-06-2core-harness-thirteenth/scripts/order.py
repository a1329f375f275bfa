import sys, time, statistics, resource, gc
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from dataperf.data import resolve
data = resolve("/tmp/gcc/data"); paths = data.urls()
def blocks(n=30):
    pn = ps = dn = ds = 0; pf = df = 0
    for k in range(n):
        for side in ((0, 1) if k % 2 == 0 else (1, 0)):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            if side == 0:
                a, b = h.plain_timed(paths, 0, False, 2); pn += a; ps += b
                pf += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            else:
                a, b, _ = h.dataperf_timed(data, 0, False, 2); dn += a; ds += b
                df += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    return (dn / ds) / (pn / ps), pf, df
what = sys.argv[1]
for r in range(3):
    print("lone    ", "ratio %.3f plain faults %d dataperf faults %d" % blocks())
    if what == "dp":
        h.dataperf_timed(data, 2, False, 10); h.dataperf_timed(data, 1, False, 10)
    elif what == "plain":
        h.plain_timed(paths, 2, False, 10); h.plain_timed(paths, 1, False, 10)
    print("after " + what, "ratio %.3f plain faults %d dataperf faults %d" % blocks())
