"""Window CPU: trial.time's perf_counter swapped for thread_time, so Repeat.wall_s is the window's CPU."""
import statistics, sys, time, types
exec(open("/tmp/h30/cpu.py").read().split("E = 20")[0])
from dataperf.measure import cache
E = 50
orig_tree = cache.tree_read_bytes
T.time = types.SimpleNamespace(perf_counter=time.thread_time, monotonic=time.monotonic, sleep=time.sleep)
def dp(stub):
    cache.tree_read_bytes = (lambda: 0) if stub else orig_tree
    w = sum(time_repeat(batches, None).wall_s for _ in range(E))
    cache.tree_read_bytes = orig_tree
    return w / (E * 2000) * 1e6
def plain_c():
    c = time.thread_time()
    for _ in range(E):
        for b in plain: pass
    return (time.thread_time() - c) / (E * 2000) * 1e6
rows = {"plain": [], "dp": [], "dp_stub": []}
with watchdog.Watchdog():
    for k in range(int(sys.argv[1])):
        rows["plain"].append(plain_c()); rows["dp"].append(dp(False)); rows["dp_stub"].append(dp(True))
for k, v in rows.items():
    print(f"{k:8s} window cpu {statistics.median(v):.3f} us/sample  " + " ".join(f"{x:.2f}" for x in v))
