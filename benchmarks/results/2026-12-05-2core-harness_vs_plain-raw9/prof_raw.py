"""Where dataperf's trial spends time beyond a plain loop: raw bytes, 0 workers, 2,000 64-px JPEGs, warm."""
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, "/work/main/benchmarks")
import harness_vs_plain as h  # noqa: E402
from dataperf.data import resolve  # noqa: E402
from dataperf.data.make.generate import ImageSpec, write_dataset  # noqa: E402

root = Path("/tmp/prof/data")
if not (root / "manifest.json").exists():
    write_dataset(root, "image", "files", 2000, seed=0, image=ImageSpec(64, 64, 85), overwrite=True)
data = resolve(str(root))
paths = data.urls()
for p in paths:
    Path(p).read_bytes()
E = 50
for k in range(3):
    t0 = time.perf_counter(); a = h.plain_rate(paths, 0, False, E); t1 = time.perf_counter()
    b, _ = h.dataperf_rate(data, 0, False, E); t2 = time.perf_counter()
    print(f"round {k}: plain {a:,.0f}/s ({t1-t0:.2f} s)  dataperf {b:,.0f}/s ({t2-t1:.2f} s wall) ratio {b/a:.3f}")
pr = cProfile.Profile(); pr.enable(); h.dataperf_rate(data, 0, False, E); pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
pr = cProfile.Profile(); pr.enable(); h.plain_rate(paths, 0, False, E); pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
