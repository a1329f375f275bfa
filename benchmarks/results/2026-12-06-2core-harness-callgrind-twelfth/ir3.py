"""Issue 30: user-space instructions a sample of each piece of the 0-worker raw path, plain against dataperf,
each piece run under its own C-level driver so that callgrind_annotate --inclusive=yes gives its cost:
    valgrind --tool=callgrind --callgrind-out-file=OUT python ir3.py E
(PYTHONPATH picks the dataperf tree; the data: /tmp/h30/data, 2,000 64-px JPEG files).
functools_reduce: plain loop; starmap_next: dataperf loader (bare); dropwhile_next: plain __getitem__ a sample;
takewhile_next: dataperf __getitems__; filterfalse_next: dataperf collate of what __getitems__ gave;
accumulate_next: plain batch sampler (sequential); list_sort_impl: dataperf batch sampler (Order);
groupby_next: time_repeat over the dataperf loader."""
import functools
import itertools
import sys

sys.path.insert(0, "/work/main/benchmarks")
from harness_vs_plain import BATCH, PlainFiles, raw_collate  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from dataperf import backends  # noqa: E402
from dataperf.backends.dataloader import collate  # noqa: E402
from dataperf.data import resolve  # noqa: E402
from dataperf.measure.trial import TrialOptions, time_repeat  # noqa: E402
from dataperf.results import LoaderConfig  # noqa: E402

E = int(sys.argv[1])
data = resolve("/tmp/h30/data")
paths = data.urls()
plain = DataLoader(PlainFiles(paths, False), batch_size=BATCH, num_workers=0, collate_fn=raw_collate)
cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=32, decode=False, shuffle=False)
opts = TrialOptions(repeats=1, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
batches, _ = backends.get("files").make(data, cfg, opts)
ds, pds = batches.dataset, plain.dataset
idxs = [list(range(i, min(i + BATCH, len(paths)))) for i in range(0, len(paths), BATCH)]
got = [ds.__getitems__(ix) for ix in idxs]
for _ in plain:  # first opens, code paths warm
    pass
for _ in batches:
    pass


def plain_loop(*_):
    for _ in range(E):
        for _b in plain:
            pass


def dp_loop(*_):
    for _ in range(E):
        for _b in batches:
            pass


def plain_get(*_):
    for _ in range(E):
        for ix in idxs:
            [pds[i] for i in ix]


def dp_get(*_):
    for _ in range(E):
        for ix in idxs:
            ds.__getitems__(ix)


def dp_collate(*_):
    for _ in range(E):
        for g in got:
            collate(g)


def plain_samp(*_):
    for _ in range(E):
        for _b in plain.batch_sampler:
            pass


def dp_samp(*_):
    for _ in range(E):
        for _b in batches.batch_sampler:
            pass


def dp_repeat(*_):
    for _ in range(E):
        time_repeat(batches, None)


functools.reduce(lambda a, b: plain_loop(), range(1), None)
list(itertools.starmap(dp_loop, [()]))
list(itertools.dropwhile(lambda _: plain_get(), [0]))
list(itertools.takewhile(lambda _: dp_get() or True, [0]))
list(itertools.filterfalse(lambda _: dp_collate(), [0]))
list(itertools.accumulate([0, 0], lambda a, b: plain_samp()))
sorted([0, 1], key=lambda _: dp_samp())
list(itertools.groupby([0], key=lambda _: dp_repeat()))
