"""torchdata.nodes: a sampler over the dataset's samples, a ParallelMapper reading and decoding them in
thread or process workers, then batching, collation and a Prefetcher of prefetch_factor batches."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dataperf.backends import Prepared
from dataperf.backends.dataloader import collate
from dataperf.backends.samples import RankSamples
from dataperf.data.manifest import Manifest
from dataperf.results import LoaderConfig


class TorchdataLoader(RankSamples):
    """One torchdata.nodes graph per epoch (workers start with the epoch, like non-persistent workers)."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import torch
        import torchdata.nodes as tn

        node: Any = tn.IterableWrapper(self.refs())
        if self.cfg.num_workers > 0:
            node = tn.ParallelMapper(node, self.load, num_workers=self.cfg.num_workers, in_order=True,
                                     method=self.worker_type)
        else:
            node = tn.Mapper(node, self.load)
        node = tn.Mapper(tn.Batcher(node, self.cfg.batch_size, drop_last=False), collate)
        if self.cfg.pin_memory and torch.cuda.is_available():
            node = tn.PinMemory(node)
        if self.cfg.num_workers > 0:
            node = tn.Prefetcher(node, prefetch_factor=self.cfg.prefetch_factor or 2)
        loader = tn.Loader(node, restart_on_stop_iteration=False)
        try:
            yield from loader
        finally:
            _shutdown(node)
            del loader, node
            gc.collect()  # a forked worker of the next epoch must not inherit (and finalize) this graph


def _shutdown(node: Any) -> None:
    """Stop the graph's worker threads/processes now, not at garbage collection (the next repeat is timed)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if hasattr(n, "_shutdown"):
            n._shutdown()
        stack += [c for c in (getattr(n, "source", None), getattr(n, "_it", None)) if c is not None]


def build(root: Path, m: Manifest, cfg: LoaderConfig, opts: Any, prep: Prepared) -> TorchdataLoader:
    return TorchdataLoader(root, m, cfg, opts, prep.info["worker_type"])
