import gc, sys
from dataperf.measure.trial import time_repeat
b = {"n": 64, "nbytes": 1000, "worker": -1, "stage_s": {"read": 0.001, "collate": 0.0001}, "done_s": 1.0}
counts = []
def gen(N):
    for _ in range(N):
        counts.append(gc.get_count()[0])
        yield b
time_repeat(gen(10), None)
counts.clear()
gc.disable()
r = time_repeat(gen(3000), None)
gc.enable()
d = [y - x for x, y in zip(counts[1:], counts[2:])]
import statistics
print("per batch net tracked:", statistics.mean(d), max(d), min(d), r.batches, len(r.arrivals))
