"""Quiet box: wall of the timed window a sample, plain loop vs dataperf, raw bytes, w=0, variants interleaved:
plain; plain inside a Watchdog; time_repeat without / with a Watchdog; run_trial (as the benchmark)."""
import statistics, sys, time
exec(open("/tmp/h30/cpu.py").read().split("E = 20")[0])
from dataperf.measure.trial import run_trial
from harness_vs_plain import plain_rate
E = int(sys.argv[2]) if len(sys.argv) > 2 else 50
def plain_w():
    t = time.perf_counter()
    for _ in range(E):
        for b in plain: pass
    return (time.perf_counter() - t) / (E * 2000) * 1e6
def plain_new():
    return 1e6 / plain_rate(paths, 0, False, E) / 1
def bare():
    t = time.perf_counter()
    for _ in range(E):
        for b in batches: pass
    return (time.perf_counter() - t) / (E * 2000) * 1e6
def dp():
    return sum(time_repeat(batches, None).wall_s for _ in range(E)) / (E * 2000) * 1e6
def trial():
    r = run_trial(data, cfg, TrialOptions(repeats=E, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False))
    return sum(r.repeat_s) / sum(r.repeat_samples) * 1e6
rows = {k: [] for k in ("plain", "plain_new", "plain_dog", "bare", "dp", "dp_dog", "trial")}
for k in range(int(sys.argv[1])):
    rows["plain"].append(plain_w())
    rows["plain_new"].append(plain_new())
    rows["bare"].append(bare())
    rows["dp"].append(dp())
    rows["trial"].append(trial())
    with watchdog.Watchdog():
        rows["plain_dog"].append(plain_w())
        rows["dp_dog"].append(dp())
p = statistics.median(rows["plain"])
for k, v in rows.items():
    m = statistics.median(v)
    print(f"{k:10s} wall {m:.3f} us/sample  plain/this {p / m:.3f}   " + " ".join(f"{x:.2f}" for x in v))
