import sys, time, statistics, gc
from dataperf.measure.trial import time_repeat
b = {"n": 64, "nbytes": 1000, "worker": -1, "stage_s": {"read": 0.001, "collate": 0.0001}, "done_s": 1.0, "payload": []}
N = 20000
def gen():
    for _ in range(N): yield b
def bare():
    t = time.perf_counter()
    for x in gen(): pass
    return time.perf_counter() - t
def rep():
    return time_repeat(gen(), None).wall_s
res = []
for _ in range(15):
    res.append((rep() - bare()) / N * 1e6)
print(f"books us/batch median {statistics.median(res):.3f} min {min(res):.3f}")
