"""Access patterns (dataperf.backends.order): shuffled reads as training does them, storage order with shuffle off,
repeats that continue through the data instead of re-reading its first files, and the cost of random reads
on storage where a read out of storage order pays a (simulated) seek. Real DataLoaders with real workers."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest

from dataperf import backends
from dataperf.backends.order import Order
from dataperf.data import Data, resolve, user_dataset
from dataperf.measure.trial import TrialOptions, run_trial, time_repeat
from dataperf.results import LoaderConfig

OPTS = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False, repeat_seconds=None)


def test_order_is_a_seeded_permutation_per_pass_or_storage_order():
    shuffled = list(Order(50, True, seed=1))
    assert sorted(shuffled) == list(range(50)) and shuffled != list(range(50))
    assert list(Order(50, True, seed=1)) == shuffled and list(Order(50, True, seed=2)) != shuffled
    assert list(Order(50, False, seed=1)) == list(range(50))
    ranks = [list(Order(50, True, seed=1, rank=r, world_size=2)) for r in (0, 1)]
    assert sorted(ranks[0] + ranks[1]) == list(range(50))  # DistributedSampler's split: disjoint, complete


@pytest.mark.parametrize("n,world_size", [(50, 1), (50, 3), (7, 4), (1, 3)])
def test_a_pass_is_distributed_samplers_own_for_that_epoch(n, world_size):
    """Each pass is DistributedSampler's permutation, padding and split for its epoch (made in numpy: its Python
    list cost 50 us a pass), for every rank, padded past the data's length too (1 sample for 3 ranks)."""
    from torch.utils.data import DistributedSampler

    for shuffle in (True, False):
        for rank in range(world_size):
            o = Order(n, shuffle, seed=5, rank=rank, world_size=world_size)
            for epoch in range(3):
                o.set_epoch(epoch)
                want = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=5)
                want.set_epoch(epoch)
                assert o._pass().tolist() == list(want)


@pytest.mark.parametrize("world_size", [1, 3])
def test_whole_pass_iterations_read_each_epochs_permutation(world_size):
    """Whole-epoch repeats: each iteration reads one whole pass, in that epoch's own permutation (one rank: the
    pass is taken as it comes, no reordering by what the last iteration read, since it read all of it); with
    several ranks a pass holds other indices than the last, so what the last read still goes last."""
    from torch.utils.data import DistributedSampler

    o = Order(50, True, seed=5, rank=0, world_size=world_size)
    got = [list(o) for _ in range(4)]
    want = []
    for epoch in range(4):
        d = DistributedSampler(range(50), num_replicas=world_size, rank=0, shuffle=True, seed=5)
        d.set_epoch(epoch)
        want.append(list(d))
    assert all(sorted(g) == sorted(w) for g, w in zip(got, want, strict=True))
    if world_size == 1:
        assert got == want
    else:
        for prev, cur in zip(got, got[1:], strict=False):
            fresh = [i for i in cur if i not in prev]
            assert cur[:len(fresh)] == fresh  # those the last pass did not read come first


@pytest.mark.parametrize("shuffle", [True, False])
def test_order_continues_across_iterations_and_never_repeats_within_one(shuffle):
    """Iterations cut short continue where the last stopped; one that runs into the next pass still reads
    every sample once, and (while two fit in a pass) none the previous iteration read."""
    o = Order(20, shuffle, seed=3)
    seen = []
    for take in (7, 7, 7, 7, 20, 20):
        it = iter(o)
        seen.append([next(it) for _ in range(take)])
    assert len(set(seen[0] + seen[1])) == 14  # the second continues the first pass
    for prev, cur in zip(seen, seen[1:], strict=False):
        assert len(set(cur)) == len(cur)  # never twice in one iteration
        if len(prev) + len(cur) <= 20:
            assert not set(prev) & set(cur)  # the third wraps into pass 2, the fourth too: still disjoint
    assert sorted(seen[4]) == sorted(seen[5]) == list(range(20))  # whole iterations read every sample once
    if not shuffle:
        assert seen[0] + seen[1] == list(range(14))


def pass_labels(data, cfg: LoaderConfig, opts: TrialOptions = OPTS) -> list:
    """What tells one pass's samples apart (labels_of), in the order the backend delivered them."""
    d = data if isinstance(data, Data) else resolve(str(data))
    batches, _ = backends.get(cfg.backend).make(d, cfg, opts)
    return [y for b in batches for y in labels_of(b)]


def labels_of(b: dict) -> list:
    """What tells a batch's samples apart: a decoded batch's labels, a raw batch's payloads (every synthetic
    image differs), else (DALI's raw webdataset reader) the batch's byte count for each of its samples."""
    if "y" in b:
        return b["y"].tolist()
    return list(b["payload"]) if "payload" in b else [b["nbytes"]] * b["n"]


# (backend, dataset, extra config, whether one pass reads every sample exactly once)
DALI = {"dali_num_threads": 1, "num_workers": 0, "decode": True, "image_size": 16}
CASES = [("files", "image-files", {}, True), ("webdataset", "image-webdataset", {}, True),
         ("torchdata", "image-webdataset", {}, True), ("spdl", "image-files", {}, True),
         ("dali", "image-files", {**DALI, "shuffle_buffer": 1}, True),  # DALI's file reader permutes its list
         # DALI's webdataset reader labels every sample 0 (payload bytes stand in), its buffer mixes passes
         ("dali", "image-webdataset", {**DALI, "decode": False, "shuffle_buffer": 16}, False)]


@pytest.mark.parametrize("backend,name,extra,exact", CASES)
def test_shuffled_pass_reads_every_sample_once_in_another_order_reproducibly(datasets, backend, name, extra, exact):
    if not backends.get(backend).installed():
        pytest.skip(f"{backend} not installed")
    base = LoaderConfig(**{"backend": backend, "batch_size": 8, "num_workers": 2, **extra})
    sequential = pass_labels(datasets[name], replace(base, shuffle=False))
    shuffled = pass_labels(datasets[name], base)
    assert len(shuffled) == len(sequential) == 96
    assert shuffled != sequential
    if exact:
        assert sorted(shuffled) == sorted(sequential)
    assert pass_labels(datasets[name], base) == shuffled  # the same seed, the same order
    if backend != "dali":  # DALI permutes its file list with a fixed seed of its own, whatever the pipeline's
        assert pass_labels(datasets[name], base, replace(OPTS, seed=7)) != shuffled


def test_remote_shards_are_shuffled_like_local_ones(datasets):
    """Shards over HTTP go through the same shard order and sample buffer as local ones."""
    from tests.data.servers import HttpServer

    folder = datasets["image-webdataset"]
    shards = sorted(p.name for p in folder.glob("*.tar"))
    cfg = LoaderConfig(backend="webdataset", batch_size=8, num_workers=2)
    with HttpServer(folder) as srv:
        remote = resolve(f"{srv.url}/shard-{{000000..{len(shards) - 1:06d}}}.tar")
        assert remote.remote
        shuffled = pass_labels(remote, cfg)
        sequential = pass_labels(remote, replace(cfg, shuffle=False))
    assert shuffled == pass_labels(folder, cfg)  # the same seeded order as the same shards read locally
    assert sequential == pass_labels(folder, replace(cfg, shuffle=False)) != shuffled
    assert sorted(shuffled) == sorted(sequential)


def test_webdataset_shards_come_in_a_new_order_every_pass(datasets):
    """Shard order is per pass: a second iteration of the same loader reads the shards in another order."""
    cfg = LoaderConfig(backend="webdataset", batch_size=8, num_workers=0, shuffle_buffer=1)
    batches, _ = backends.get("webdataset").make(resolve(str(datasets["image-webdataset"])), cfg, OPTS)
    passes = [[y for b in batches for y in labels_of(b)] for _ in range(3)]
    assert all(sorted(p) == sorted(passes[0]) for p in passes)
    assert len({tuple(p) for p in passes}) > 1  # 4 shards: 24 orders, so two of three passes may agree


def test_token_windows_follow_shuffle(tmp_path):
    """Sequential windows lie back to back in storage order; shuffled ones at seeded random offsets."""
    tokens = np.arange(64 * 16, dtype=np.uint16)
    tokens.tofile(tmp_path / "train.bin")
    data = resolve(str(tmp_path / "train.bin"))

    def payload(shuffle: bool, seed: int = 0) -> bytes:
        cfg = LoaderConfig(backend="tokens-bin", batch_size=4, seq_len=16, shuffle=shuffle)
        batches, _ = backends.get("tokens-bin").make(data, cfg, replace(OPTS, seed=seed))
        return b"".join(p for b in batches for p in b["payload"])

    assert payload(False) == tokens.tobytes()
    assert len(payload(True)) == len(tokens.tobytes()) and payload(True) != tokens.tobytes()
    assert payload(True) == payload(True) and payload(True, seed=1) != payload(True)


LOGGED = '''
import os, time
from torch.utils.data import Dataset, IterableDataset

class Logged(Dataset):
    """Index i sleeps 5 ms and appends i to $SERVED_LOG: which samples each repeat read, from any worker."""
    def __len__(self):
        return 2000
    def __getitem__(self, i):
        time.sleep(0.005)
        with open(os.environ["SERVED_LOG"], "a") as f:
            f.write(f"{i}\\n")
        return i

class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(64))

def build():
    return Logged()

def stream():
    return Stream()
'''


@pytest.fixture
def logged(tmp_path, monkeypatch):
    (tmp_path / "logged_ds.py").write_text(LOGGED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SERVED_LOG", str(tmp_path / "served.log"))
    yield tmp_path / "served.log"
    sys.modules.pop("logged_ds", None)


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("persistent", [False, True])
def test_consecutive_budgeted_repeats_read_disjoint_samples(logged, shuffle, persistent):
    """A user's map-style Dataset through the sampler: each repeat, cut by its time budget, reads samples no
    earlier repeat read (prefetched ones included), so repeats that start cold stay cold."""
    data = user_dataset("logged_ds:build")
    cfg = LoaderConfig(backend="user-dataset", batch_size=4, num_workers=2, persistent_workers=persistent,
                       shuffle=shuffle)
    batches, prep = backends.get("user-dataset").make(data, cfg, OPTS)
    assert prep.ignored == []  # a map-style Dataset is shuffled through the sampler
    served = []
    for _ in range(3):
        logged.write_text("")
        rep = time_repeat(batches, None, seconds=0.3, min_batches=3)
        assert 0 < rep.samples < 2000  # cut by the budget, not by the end of the data
        served.append([int(x) for x in logged.read_text().split()])
    sets = [set(s) for s in served]
    assert all(len(s) == len(x) for s, x in zip(sets, served, strict=True))
    assert not (sets[0] & sets[1]) and not (sets[1] & sets[2]) and not (sets[0] & sets[2])
    if not shuffle:  # storage order, continued: each repeat starts after the last one's furthest read
        assert min(served[1]) > max(served[0]) and min(served[2]) > max(served[1])
    else:
        assert max(served[0]) > 400  # a random subset spread over the whole dataset, not its first files


def test_a_users_iterable_dataset_is_not_shuffled_and_says_so(logged):
    r = run_trial(user_dataset("logged_ds:stream"), LoaderConfig(backend="user-dataset", batch_size=4), OPTS)
    assert r.status == "ok", r.error
    assert r.knobs_ignored == ["shuffle"]
    assert any("IterableDataset" in n and "cannot shuffle" in n for n in r.notes), r.notes


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    from dataperf.data.make.generate import ImageSpec, write_dataset

    p = tmp_path_factory.mktemp("seek") / "img"
    write_dataset(p, "image", "files", 96, seed=5, image=ImageSpec(16, 16, 80))
    return p


@pytest.mark.slow
def test_random_small_file_reads_pay_the_seek_and_workers_hide_it(small_files):
    """Storage where a read that is not the next one in storage order sleeps SEEK_S (a simulated seek, per
    reading process). Sequential reads pay one seek per batch (each batch is a run of consecutive files),
    shuffled reads one per sample: analytically 8x slower at batch 8, and 4 workers overlap 4 seeks."""
    seek = 0.02

    def rate(shuffle: bool, workers: int) -> float:
        cfg = LoaderConfig(backend="files", batch_size=8, num_workers=workers, shuffle=shuffle)
        r = run_trial(small_files, cfg, replace(OPTS, seek_s=seek))
        assert r.status == "ok", r.error
        return r.samples_per_s_median

    seq1, shuf1, shuf4 = rate(False, 1), rate(True, 1), rate(True, 4)
    assert shuf1 <= 1.1 / seek  # every shuffled read seeks: about one sample per seek (a few are neighbours)
    assert shuf1 < 0.5 * seq1  # analytic 1/8 (plus the same per-sample CPU work on both sides)
    assert shuf4 > 2 * shuf1  # analytic 4x: the seeks are sleeps, overlapped across workers
