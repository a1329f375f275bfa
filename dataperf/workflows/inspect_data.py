"""What DATA holds, read from the data itself: any DATA bench reads (dataperf's `shards inspect --verify`), so a
corrupt sample is found here, not mid-training."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
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
    """Any DATA bench reads: a local dataset folder (inspect_dataset), shards named by a glob, a brace pattern
    or URLs (each streamed end to end), or token and text files and image Parquet read through bench's own
    Dataset with decode on (sizes, token lengths; with verify each image decoded, every bad one listed by its
    place in the file)."""
    path = Path(spec)
    if path.is_dir():
        return inspect_dataset(path, verify)
    data = resolve(spec)
    sizes: list[int] = []
    lengths: list[int] = []
    corrupt: list[str] = []
    if data.sharded:
        for url in data.urls():
            name = url.rsplit("/", 1)[-1]
            if data.remote:
                with open_url(url) as stream:
                    check_shard(iter_tar_samples(url, stream), name, spec, verify, sizes, lengths, corrupt)
            else:
                check_shard(iter_tar_samples(Path(url)), name, spec, verify, sizes, lengths, corrupt)
        shard_count = len(data.urls())
    else:
        shard_count = 0
        for s in samples_of(data, decode=verify or data.kind == "tokens"):
            if "corrupt" in s:
                corrupt.append(f"{s.get('where')}: {s.get('why')}")
                continue
            sizes.append(s["nbytes"])
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
                      percentile(sizes, 50), percentile(sizes, 99), lengths, verify, corrupt)


def samples_of(data: Data, seq_len: int | None = None, decode: bool = True) -> Iterator[dict[str, Any]]:
    """Every sample of DATA in storage order as bench's Dataset gives it (a flat token stream cut into seq_len
    windows, 512 by default), decoded a corrupt one is a marker naming it (on_corrupt skip)."""
    cfg = LoaderConfig(backend=data.format, decode=decode, shuffle=False, on_corrupt="skip",
                       seq_len=(seq_len or DEFAULT_WINDOW) if windowed(data) else None)
    ds = make_dataset(data, cfg, TrialOptions())
    return iter(ds) if isinstance(ds, IterableDataset) else (ds[i] for i in range(len(ds)))
