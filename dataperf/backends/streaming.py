"""Mosaic Streaming (mosaicml-streaming): the samples converted once with MDSWriter into MDS shards, read
back through streaming.StreamingDataset in a torch DataLoader (process workers).

mosaicml-streaming 0.13 needs numpy<2.2, torchvision and transformers at import, which cannot sit beside
dataperf's torch pin in one environment; it runs where it is installed on its own (docs/backends.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataperf.backends import Prepared
from dataperf.backends.dataloader import SampleDecoder, collate, throttle, validate, worker_kwargs
from dataperf.backends.samples import SampleRef, Store, converted, raw_sample
from dataperf.data.manifest import Manifest
from dataperf.errors import TrialError
from dataperf.results import LoaderConfig

COLUMNS = {"payload": "bytes", "ext": "str", "label": "int"}
SHARD_BYTES = 1 << 26


def _write(refs: list[SampleRef], out: Path) -> None:
    from streaming import MDSWriter

    with MDSWriter(out=str(out), columns=COLUMNS, size_limit=SHARD_BYTES) as w:
        for ref in refs:
            w.write(raw_sample(ref))


def prepare(root: Path, m: Manifest, cfg: LoaderConfig) -> Prepared:
    store = converted(root, m, "streaming", _write)
    return Prepared(store.files(), store.info(), state=store)


def _dataset(store: Store, cfg: LoaderConfig, throttle_mib_s: float | None, seed: int,
             sample_cost_s: float | None = None):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    decoder = SampleDecoder(cfg)

    class Decoded(StreamingDataset):
        """Streaming's dataset with dataperf's decode applied per sample (in the worker)."""

        def __getitem__(self, index: Any) -> dict[str, Any]:
            s = super().__getitem__(index)
            throttle(len(s["payload"]), throttle_mib_s, sample_cost_s)
            return decoder(s["ext"], s["payload"], int(s["label"]))

    clean_stale_shared_memory()  # a previous trial's dataset in this process leaves its shm names behind
    # Streaming's own shuffle (its default algorithm, shards and samples in a seeded order per epoch)
    return Decoded(local=str(store.path), remote=None, shuffle=cfg.shuffle, shuffle_seed=seed,
                   batch_size=cfg.batch_size)


def build(root: Path, m: Manifest, cfg: LoaderConfig, opts: Any, prep: Prepared):
    from torch.utils.data import DataLoader

    validate(cfg)
    if opts.world_size > 1:
        raise TrialError("the streaming backend is measured on one rank here (streaming splits by its own "
                         "distributed env); run it without --nproc")
    ds = _dataset(prep.state, cfg, opts.throttle_mib_s, opts.seed, opts.sample_cost_s)
    return DataLoader(ds, batch_size=cfg.batch_size, collate_fn=collate, **worker_kwargs(cfg))
