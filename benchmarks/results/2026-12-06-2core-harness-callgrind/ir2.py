import sys, functools, itertools
sys.path.insert(0, "/work/main/benchmarks")
from harness_vs_plain import PlainFiles, raw_collate, BATCH
from torch.utils.data import DataLoader
from dataperf.data import resolve
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig
from dataperf import backends
from dataperf.backends.dataloader import collate, RawSamples
E = int(sys.argv[1])
data = resolve("/tmp/h30/data"); paths = data.urls()
plain = DataLoader(PlainFiles(paths, False), batch_size=BATCH, num_workers=0, collate_fn=raw_collate)
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=32, decode=False, shuffle=False)
opts = TrialOptions(repeats=1, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
batches, _ = backends.get("files").make(data, cfg, opts)
ds, pds = batches.dataset, plain.dataset
idxs = [list(range(i, min(i + BATCH, len(paths)))) for i in range(0, len(paths), BATCH)]
labels = ds.labels
got = [ds.__getitems__(ix) for ix in idxs]
def plain_loop(*_):
    for _ in range(E):
        for b in plain: pass
def dp_loop(*_):
    for _ in range(E):
        for b in batches: pass
def plain_get(*_):
    for _ in range(E):
        for ix in idxs: [pds[i] for i in ix]
def dp_get(*_):
    for _ in range(E):
        for ix in idxs: ds.__getitems__(ix)
def dp_collate(*_):
    for _ in range(E):
        for g in got: collate(g)
def plain_samp(*_):
    for _ in range(E):
        for b in plain.batch_sampler: pass
def dp_samp(*_):
    for _ in range(E):
        for b in batches.batch_sampler: pass
functools.reduce(lambda a, b: plain_loop(), range(1), None)      # functools_reduce
list(itertools.starmap(dp_loop, [()]))                           # starmap_next
list(itertools.dropwhile(lambda _: plain_get(), [0]))            # dropwhile_next
list(itertools.takewhile(lambda _: dp_get() or True, [0]))       # takewhile_next
list(itertools.filterfalse(lambda _: dp_collate(), [0]))         # filterfalse_next
list(itertools.accumulate([0, 0], lambda a, b: plain_samp()))    # accumulate_next
sorted([0, 1], key=lambda _: dp_samp())                          # list_sort_impl
