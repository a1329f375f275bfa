import statistics, sys, threading, time, os
from pathlib import Path
mode = sys.argv[1]
if mode in ("numpy", "both"):
    import numpy
print("tasks", len(os.listdir("/proc/self/task")))
os.sched_setaffinity(0, {1})
paths = sorted(str(p) for p in Path("/tmp/gcc/data").rglob("*.jpg"))
def block():
    t = time.perf_counter()
    for p in paths:
        with open(p, "rb") as f:
            f.read()
    return (time.perf_counter() - t) / len(paths) * 1e6
block()
ratios = []
for k in range(40):
    a = block()
    stop = threading.Event(); th = threading.Thread(target=stop.wait, daemon=True); th.start()
    w = block()
    stop.set(); th.join()
    a2 = block()
    ratios.append((a + a2) / 2 / w)
print(mode, f"ratio alone/with idle thread: {statistics.median(ratios):.3f}")
