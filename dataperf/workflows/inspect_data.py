"""What DATA holds, read from the data itself: any DATA bench reads (dataperf's `shards inspect --verify`), so a
corrupt sample is found here, not mid-training."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils.data import IterableDataset

from dataperf.backends.dataloader import make_dataset
from dataperf.data import Data, resolve
from dataperf.data.make.inspect import Inspection, check_shard, inspect_dataset
from dataperf.data.remote import open_url
from dataperf.data.tario import iter_tar_samples
from dataperf.data.tokens import DEFAULT_WINDOW, windowed
from dataperf.errors import UserError
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig, percentile


def inspect_spec(spec: str, verify: bool = False) -> Inspection:
    """Any DATA bench reads, resolved as bench resolves it (a folder's training split, its images only): local
    shards and folders of files through inspect_dataset, remote shards each streamed end to end, token and text
    files, image Parquet and another loader's folder through bench's own Dataset with decode on for tokens
    (sizes, token lengths; with verify each image decoded, every bad one listed by its place)."""
    data = resolve(spec)
    if not data.remote and data.format in ("webdataset", "files"):
        ins = inspect_dataset(data, verify)
        ins.data = data
        return ins
    sizes: list[int] = []
    lengths: list[int] = []
    corrupt: list[str] = []
    if data.sharded:
        for url in data.urls():
            with open_url(url) as stream:
                check_shard(iter_tar_samples(url, stream), url.rsplit("/", 1)[-1], spec, verify, sizes, lengths,
                            corrupt)
        shard_count = len(data.urls())
    else:
        shard_count = 0
        for s in samples_of(data, decode=verify or data.kind == "tokens"):
            if "corrupt" in s:
                corrupt.append(f"{s.get('where')}: {s.get('why')}")
                continue
            sizes.append(sample_nbytes(s))
            if data.kind == "tokens" and "x" in s:
                lengths.append(len(s["x"]))
    if corrupt and not verify:
        raise UserError(f"corrupt sample {corrupt[0]}; run `dataperf shards inspect --verify {spec}` to list every "
                        "bad sample")
    if not sizes and not corrupt:
        raise UserError(f"{spec} holds no samples")
    kind = "tokens" if lengths else data.kind
    mean = float(np.mean(sizes)) if sizes else float("nan")
    return Inspection(spec, data.format, kind, len(sizes), int(sum(sizes)), shard_count, mean,
                      percentile(sizes, 50), percentile(sizes, 99), lengths, verify, corrupt, data)


def sample_nbytes(sample: Any) -> int:
    """A sample's size: bench's samples carry it (nbytes); another loader's reader gives columns, summed (its
    images as the tensors bench makes of them)."""
    if isinstance(sample, dict) and "nbytes" in sample:
        return int(sample["nbytes"])
    values = sample.values() if isinstance(sample, dict) else sample if isinstance(sample, (list, tuple)) else [sample]
    total = 0
    for v in values:
        if isinstance(v, (bytes, str)):
            total += len(v)
        elif hasattr(v, "nbytes"):  # numpy arrays, torch tensors
            total += int(v.nbytes)
    return total


def samples_of(data: Data, seq_len: int | None = None, decode: bool = True) -> Iterator[dict[str, Any]]:
    """Every sample of DATA in storage order as bench's Dataset gives it (a flat token stream cut into seq_len
    windows, 512 by default), decoded a corrupt one is a marker naming it (on_corrupt skip)."""
    cfg = LoaderConfig(backend=data.format, decode=decode, shuffle=False, on_corrupt="skip",
                       seq_len=(seq_len or DEFAULT_WINDOW) if windowed(data) else None)
    ds = make_dataset(data, cfg, TrialOptions())
    return iter(ds) if isinstance(ds, IterableDataset) else (ds[i] for i in range(len(ds)))
