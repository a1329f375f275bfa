"""Per-block rates at 1 worker raw, with rusage of main (self) and reaped workers (children) per block."""
import json, os, resource, sys, time
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from pathlib import Path
from dataperf.data import resolve
root = Path("/tmp/h30/data"); h.make_data(root, 2000)
data = resolve(str(root)); paths = data.urls()
for p in paths: Path(p).read_bytes()
W = int(sys.argv[1]) if len(sys.argv) > 1 else 1
N = int(sys.argv[2]) if len(sys.argv) > 2 else 40
E = int(sys.argv[3]) if len(sys.argv) > 3 else 2
def ru():
    s = resource.getrusage(resource.RUSAGE_SELF); c = resource.getrusage(resource.RUSAGE_CHILDREN)
    st = open("/proc/self/schedstat").read().split()
    return [s.ru_utime, s.ru_stime, s.ru_nvcsw, s.ru_nivcsw, c.ru_utime, c.ru_stime, c.ru_nvcsw, c.ru_nivcsw,
            int(st[0]) / 1e9, int(st[1]) / 1e9, s.ru_minflt, c.ru_minflt]
names = ["utime", "stime", "nvcsw", "nivcsw", "c_utime", "c_stime", "c_nvcsw", "c_nivcsw", "run_s", "wait_s",
         "minflt", "c_minflt"]
out = open(sys.argv[4] if len(sys.argv) > 4 else "/tmp/h30/w1diag.jsonl", "w")
for k in range(N):
    for who in (("plain", "dataperf") if k % 2 == 0 else ("dataperf", "plain")):
        a = ru()
        if who == "plain":
            n, s = h.plain_timed(paths, W, False, E)
        else:
            n, s, _ = h.dataperf_timed(data, W, False, E)
        b = ru()
        d = {nm: y - x for nm, x, y in zip(names, a, b)}
        rec = {"k": k, "who": who, "rate": n / s, "s": s, **d}
        out.write(json.dumps(rec) + "\n"); out.flush()
