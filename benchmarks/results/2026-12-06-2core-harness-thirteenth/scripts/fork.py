import sys, time, os, resource
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from dataperf.data import resolve
data = resolve("/tmp/gcc/data"); paths = data.urls()
def blocks(n=40):
    pn = ps = dn = ds = 0
    for k in range(n):
        for side in ((0, 1) if k % 2 == 0 else (1, 0)):
            if side == 0:
                a, b = h.plain_timed(paths, 0, False, 2); pn += a; ps += b
            else:
                a, b, _ = h.dataperf_timed(data, 0, False, 2); dn += a; ds += b
    return (dn / ds) / (pn / ps), pn / ps
blocks(10)
mode = sys.argv[1]
if len(sys.argv) > 2: h.WATCHDOG["stall_s"] = None
for r in range(3):
    print("before  %.3f plain %.0f" % blocks())
    if mode == "fork":
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    elif mode == "workers":
        h.plain_timed(paths, 1, False, 1)
    print("after %s %.3f plain %.0f" % ((mode,) + blocks()))
