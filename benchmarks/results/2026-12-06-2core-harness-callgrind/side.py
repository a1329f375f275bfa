"""One side of the w=0 raw-bytes comparison in a fresh process: prints its us/sample over E epochs (after one
untimed epoch), timed as harness_vs_plain.py times it."""
import sys, time
sys.path.insert(0, "/work/main/benchmarks")
from pathlib import Path
from harness_vs_plain import plain_rate, dataperf_rate
from dataperf.data import resolve
who, E = sys.argv[1], int(sys.argv[2])
data = resolve("/tmp/h30/data"); paths = data.urls()
for p in paths: Path(p).read_bytes()
if who == "plain":
    plain_rate(paths, 0, False, 1)
    r = plain_rate(paths, 0, False, E)
else:
    dataperf_rate(data, 0, False, 1)
    r = dataperf_rate(data, 0, False, E)[0]
print(1e6 / r)
