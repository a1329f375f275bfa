"""CPU time (thread_time: load-insensitive) a sample: plain DataLoader loop vs dataperf's time_repeat, raw bytes, w=0."""
import statistics, sys, time
from pathlib import Path
sys.path.insert(0, "/work/main/benchmarks")
from harness_vs_plain import PlainFiles, raw_collate, BATCH
from torch.utils.data import DataLoader
from dataperf.data import resolve
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure.trial import TrialOptions, time_repeat
from dataperf.measure import trial as T
from dataperf.results import LoaderConfig
from dataperf import backends, watchdog
root = Path("/tmp/h30/data")
if not (root / "manifest.json").exists():
    write_dataset(root, "image", "files", 2000, seed=0, image=ImageSpec(64, 64, 85), overwrite=True)
data = resolve(str(root)); paths = data.urls()
for p in paths: Path(p).read_bytes()
plain = DataLoader(PlainFiles(paths, False), batch_size=BATCH, num_workers=0, collate_fn=raw_collate)
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=32, decode=False, shuffle=False)
opts = TrialOptions(repeats=1, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
batches, _ = backends.get("files").make(data, cfg, opts)
E = 20
def p_epochs():
    t = time.thread_time()
    for _ in range(E):
        for b in plain: pass
    return (time.thread_time() - t) / (E * 2000) * 1e6
def d_epochs():
    t = time.thread_time()
    for _ in range(E):
        time_repeat(batches, None)
    return (time.thread_time() - t) / (E * 2000) * 1e6
def o_epochs():  # the sampler alone
    s = batches.batch_sampler
    t = time.thread_time()
    for _ in range(E):
        for b in s: pass
    return (time.thread_time() - t) / (E * 2000) * 1e6
def r_epochs():
    s = plain.batch_sampler
    t = time.thread_time()
    for _ in range(E):
        for b in s: pass
    return (time.thread_time() - t) / (E * 2000) * 1e6
mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
res = {"p": [], "d": [], "o": [], "r": []}
with watchdog.Watchdog():
    for k in range(int(sys.argv[1]) if len(sys.argv) > 1 else 7):
        res["p"].append(p_epochs()); res["d"].append(d_epochs()); res["o"].append(o_epochs()); res["r"].append(r_epochs())
for k, v in res.items():
    print(k, f"median {statistics.median(v):.3f} us cpu/sample", " ".join(f"{x:.2f}" for x in v))
def b_epochs():  # dataperf's loader, iterated bare
    t = time.thread_time()
    for _ in range(E):
        for b in batches: pass
    return (time.thread_time() - t) / (E * 2000) * 1e6
ds = batches.dataset
def g_epochs():  # dataperf's dataset fetch alone
    s = batches.batch_sampler
    t = time.thread_time()
    for _ in range(E):
        for idx in plain.batch_sampler: ds.__getitems__(idx)
    return (time.thread_time() - t) / (E * 2000) * 1e6
def f_epochs():  # plain dataset fetch alone
    pd = plain.dataset
    t = time.thread_time()
    for _ in range(E):
        for idx in plain.batch_sampler: [pd[i] for i in idx]
    return (time.thread_time() - t) / (E * 2000) * 1e6
res = {"b": [], "g": [], "f": [], "p": []}
with watchdog.Watchdog():
    for k in range(5):
        res["b"].append(b_epochs()); res["g"].append(g_epochs()); res["f"].append(f_epochs()); res["p"].append(p_epochs())
for k, v in res.items():
    print(k, f"median {statistics.median(v):.3f} us cpu/sample", " ".join(f"{x:.2f}" for x in v))
