"""Does an idle second thread slow a loop of open/read/close? (Linux skips the file refcount on fd syscalls only
while a process's file table is not shared: one thread.) Alternating blocks, one process, warm files.
    python idle_thread.py DIR [rounds]"""
import statistics
import sys
import threading
import time
from pathlib import Path

paths = sorted(str(p) for p in Path(sys.argv[1]).glob("*.jpg"))
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40


def block() -> float:
    t = time.perf_counter()
    for p in paths:
        with open(p, "rb") as f:
            f.read()
    return (time.perf_counter() - t) / len(paths) * 1e6


block()
ratios, alone, with_thread = [], [], []
for k in range(rounds):
    a = block()
    stop = threading.Event()
    th = threading.Thread(target=stop.wait, daemon=True)  # blocked the whole time, as the watchdog is
    th.start()
    w = block()
    stop.set()
    th.join()
    a2 = block()
    alone.append((a + a2) / 2)
    with_thread.append(w)
    ratios.append((a + a2) / 2 / w)
print(f"{len(paths)} files, {rounds} rounds: us a file alone {statistics.median(alone):.3f}, with an idle thread "
      f"{statistics.median(with_thread):.3f}; rate ratio (with / alone) median {statistics.median(ratios):.3f}, "
      f"quartiles {statistics.quantiles(ratios, n=4)[0]:.3f}-{statistics.quantiles(ratios, n=4)[2]:.3f}")
