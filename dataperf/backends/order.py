"""The order samples are read in, as training reads them: a seeded random permutation for map-style data,
a new shard order plus a sample shuffle buffer for shards; storage order with shuffle off.

Repeats of a trial are short (a time budget) and must stay cold: each one reads samples the previous ones
did not. Map-style data does so through `Order`, one permutation consumed across repeats; shards through a
new shard order per repeat (`ShardOrder`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DistributedSampler, IterableDataset, get_worker_info


class Order(DistributedSampler):
    """This rank's sample indices: DistributedSampler's seeded permutation (shuffle) or storage order, split
    across ranks, but consumed across iterations instead of restarted.

    Each iter() hands out one pass's worth of indices, starting where the previous iter() stopped handing
    them out: a repeat cut short by its time budget is followed by one that reads samples not read yet (the
    samples a DataLoader prefetched but the repeat did not consume count as read). A pass that runs out
    starts the next (set_epoch(pass): a new permutation), with the indices handed out in this iteration put
    last and those of the previous iteration next to last, so one iteration never reads a sample twice and,
    while two iterations fit in a pass, never one the previous iteration read. Whole-epoch repeats
    therefore read every sample once each, even after a warm-up that stopped mid-pass.

    An iteration that fits in the pass is a plain list iterator, what it handed out booked at the next iter():
    a generator's bookkeeping a sample cost 0.12 us of the 9.5 us a raw 64-px JPEG takes at 0 workers (issue 30).
    """

    def __init__(self, n: int, shuffle: bool, seed: int, rank: int = 0, world_size: int = 1):
        super().__init__(range(n), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed)
        self.iteration = 0
        self.pos = 0
        self.order = self._pass()  # this pass's indices, in the order they are handed out
        self.indices: list[int] = self.order.tolist()  # the same as Python ints: a sample's index costs no numpy access
        self.last_read = np.full(n, -2, dtype=np.int64)  # the iteration that last handed out each index
        self._out: tuple[Iterator[int], int, list[int], int] | None = None  # the last iteration, unbooked
        self._whole = False  # the last booked iteration handed out this whole pass (whole-epoch repeats)

    def _pass(self) -> np.ndarray:
        """DistributedSampler's indices of this rank for the pass (self.epoch), the same permutation, padding and
        split, made in numpy: its Python list of every index cost 50 us a pass of 2,000."""
        n = len(self.dataset)
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            idx = torch.randperm(n, generator=g).numpy()
        else:
            idx = np.arange(n, dtype=np.int64)
        if self.total_size > n:  # padded to split evenly, repeating from the start as DistributedSampler does
            idx = np.concatenate([idx, np.resize(idx, self.total_size - n)])
        return idx[self.rank:self.total_size:self.num_replicas]

    def _book(self) -> None:
        """Book what the last iteration's list iterator handed out: each index's iteration, and the position."""
        if self._out is None:
            return
        it, start, chunk, k = self._out
        used = len(chunk) - it.__length_hint__()
        self.last_read[self.order[start:start + used]] = k
        self.pos = start + used
        self._whole = start == 0 and used == len(self.order)
        self._out = None

    def _next_pass(self, k: int) -> None:
        self.set_epoch(self.epoch + 1)
        nxt = self._pass()
        if self._whole and self.num_replicas == 1:  # iteration k read every index: all rank alike, order stands
            self.order = nxt
        else:
            recent = self.last_read[nxt]
            self.order = nxt[np.argsort(np.where(recent == k, 2, np.where(recent == k - 1, 1, 0)), kind="stable")]
        self.indices = self.order.tolist()
        self.pos = 0
        self._whole = False

    def __iter__(self) -> Iterator[int]:
        self._book()
        k = self.iteration
        self.iteration += 1
        if self.pos == len(self.indices):
            self._next_pass(k)
        chunk = self.indices[self.pos:self.pos + self.num_samples]
        if len(chunk) < self.num_samples:
            return self._across(k)
        it = iter(chunk)
        self._out = (it, self.pos, chunk, k)
        return it

    def _across(self, k: int) -> Iterator[int]:
        """An iteration that runs into the next pass, booked as it goes."""
        left = self.num_samples
        while left:
            if self.pos == len(self.indices):
                self._next_pass(k)
            chunk = self.indices[self.pos:self.pos + left]
            for pos, i in enumerate(chunk, self.pos + 1):
                self.last_read[i] = k
                self.pos = pos  # handed out: a later iteration starts after it, even if this one is dropped
                yield i
            left -= len(chunk)


def iteration_seed(*parts: Any) -> random.Random:
    """A generator seeded by `parts` and the pass: every rank and worker that gives the same parts in the
    same pass draws the same numbers (so all agree on a shard order), and a new pass draws new ones.

    A DataLoader worker learns the pass from its worker seed (base_seed + worker id, base_seed drawn from
    the loader's seeded generator at every iter(): new workers each pass) and from how often this copy of the
    dataset was iterated (persistent workers keep theirs); the main process from the latter alone."""
    info = get_worker_info()
    base = info.seed - info.id if info is not None else 0
    return random.Random("-".join(str(p) for p in (*parts, base)))


class ShardOrder(IterableDataset):
    """A webdataset pipeline stage: the shard list in a new seeded order every pass (before the split by
    rank and worker, so all of them agree), or in storage order with shuffle off."""

    def __init__(self, urls: list[str], shuffle: bool, seed: int):
        self.urls, self.shuffle, self.seed = list(urls), shuffle, seed
        self.passes = 0  # iterations of this copy (persistent workers, the main process)

    def __iter__(self) -> Iterator[dict[str, str]]:
        urls = list(self.urls)
        if self.shuffle:
            iteration_seed("shards", self.seed, self.passes).shuffle(urls)
        self.passes += 1
        return iter([{"url": u} for u in urls])


class SampleBuffer:
    """A webdataset pipeline stage: webdataset's own shuffle buffer (`shuffle(n)`, each sample drawn at random
    from n), seeded per pass, rank and worker so a run is reproducible for a seed.

    It fills all n before its first sample (webdataset's `initial=n`, DALI's initial_fill): with webdataset's
    default (deliver from 100 on, read two samples per sample delivered until full) the first n - 100
    samples of every pass cost two reads each, and a short repeat would time that instead of the steady
    state an epoch spends nearly all its time in. The fill is start-up, excluded from the steady rate."""

    def __init__(self, size: int, seed: int, rank: int = 0):
        self.size, self.seed, self.rank = size, seed, rank
        self.passes = 0

    def __call__(self, src: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        import webdataset as wds

        info = get_worker_info()
        rng = iteration_seed("samples", self.seed, self.passes, self.rank, info.id if info else -1)
        self.passes += 1
        return wds.shuffle(self.size, initial=self.size, rng=rng)(iter(src))
