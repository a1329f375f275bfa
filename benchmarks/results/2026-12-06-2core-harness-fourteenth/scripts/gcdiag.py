"""Per-block rates at W workers, raw bytes (or decoded: a fifth argument "on"), with every gc collection in main and
workers (pid, gen, ms, collected)."""
import gc, json, os, sys, time
sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h
from pathlib import Path
from dataperf.data import resolve
root = Path("/tmp/h30/data"); h.make_data(root, 2000)
data = resolve(str(root)); paths = data.urls()
for p in paths: Path(p).read_bytes()
W, N, E = (int(x) for x in sys.argv[1:4])
DEC = len(sys.argv) > 5 and sys.argv[5] == "on"
log = sys.argv[4]
MAIN = os.getpid()
fd = os.open(log + ".gc", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
t0 = [0.0]
def cb(phase, info):
    if phase == "start":
        t0[0] = time.perf_counter()
    else:
        os.write(fd, (json.dumps({"pid": os.getpid(), "main": os.getpid() == MAIN, "gen": info["generation"],
                                  "ms": (time.perf_counter() - t0[0]) * 1e3, "at": time.perf_counter(),
                                  "collected": info["collected"]}) + "\n").encode())
gc.callbacks.append(cb)
out = open(log, "w")
for k in range(N):
    for who in (("plain", "dataperf") if k % 2 == 0 else ("dataperf", "plain")):
        a = time.perf_counter()
        if who == "plain":
            n, s = h.plain_timed(paths, W, DEC, E)
        else:
            n, s, _ = h.dataperf_timed(data, W, DEC, E)
        out.write(json.dumps({"k": k, "who": who, "rate": n / s, "s": s, "a": a, "b": time.perf_counter(),
                              "gc": gc.get_count()}) + "\n"); out.flush()
