"""What a dataset holds, read from the data itself (so a corrupt shard is found here, not mid-training)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dataperf.data.spec import Data
from dataperf.data.tario import PAYLOADS, iter_tar_samples, no_payload
from dataperf.errors import UserError
from dataperf.results import percentile


@dataclass
class Inspection:
    path: str
    format: str
    kind: str
    count: int
    total_bytes: int
    shard_count: int
    sample_bytes_mean: float
    sample_bytes_p50: float
    sample_bytes_p99: float
    token_lengths: list[int] = field(default_factory=list)
    verified: bool = False  # every sample decoded (--verify), not only sized
    corrupt: list[str] = field(default_factory=list)  # "shard: key: why", one per bad sample
    data: Data | None = None  # DATA as resolved (what is read, what is left out), for the `data:` line

    @property
    def token_p50(self) -> float:
        return percentile(self.token_lengths, 50)

    @property
    def token_p99(self) -> float:
        return percentile(self.token_lengths, 99)


def npy_length(data: bytes) -> int:
    arr = np.load(io.BytesIO(data), allow_pickle=False)
    return int(arr.shape[0]) if arr.ndim else 1



def check_sample(sample: dict[str, bytes], decode: bool) -> str | None:
    """Why a sample cannot be used (no payload, empty payload, unreadable array, undecodable image), or None."""
    if not any(ext in sample for ext in PAYLOADS):
        return no_payload([k for k in sample if not k.startswith("__")])
    for ext in PAYLOADS:
        if ext not in sample:
            continue
        data = sample[ext]
        if not data:
            return f"{ext} is empty (0 bytes)"
        try:
            if ext == "npy":
                npy_length(data)
            elif decode:
                from PIL import Image

                with Image.open(io.BytesIO(data)) as img:
                    img.load()
        except Exception as e:  # PIL's "cannot identify" text ends in the repr of the buffer it was handed
            why = "not an image PIL can read" if type(e).__name__ == "UnidentifiedImageError" else \
                f"{type(e).__name__}: {e}"
            return f"{ext} does not decode ({why})"
    return None


def inspect_dataset(data: Data, verify: bool = False) -> Inspection:
    """Count and size every sample of local DATA as bench resolved it (its training split, its images only):
    tar shards are read end to end, so damage is reported by file name; a folder of files (a dataperf dataset,
    a flat folder or an ImageFolder) through its manifest, each file a sample.

    Token arrays are always parsed (their lengths are the point); with verify every image is decoded too, and
    all bad samples are listed instead of stopping at the first."""
    sizes: list[int] = []
    lengths: list[int] = []
    corrupt: list[str] = []
    if data.sharded:
        tars = [Path(f.path) for f in data.files]
        for t in tars:
            check_shard(iter_tar_samples(t), t.name, data.spec, verify, sizes, lengths, corrupt)
        shard_count = len(tars)
    else:
        m = data.manifest
        for name, p in zip(m.files, m.paths(data.root), strict=True):
            if not p.is_file():
                raise UserError(f"{p} is listed in the manifest but missing; regenerate the dataset")
            if verify:
                why = check_sample({name.rpartition(".")[2].lower(): p.read_bytes()}, True)
                if why:
                    corrupt.append(f"{name}: {why}")
                    continue
            sizes.append(p.stat().st_size)
        lengths = list(m.token_lengths)
        shard_count = 0
    if not sizes and not corrupt:
        raise UserError(f"{data.spec} holds no samples")
    kind = "tokens" if lengths else (data.manifest.kind if data.manifest else data.kind)
    mean = float(np.mean(sizes)) if sizes else float("nan")
    return Inspection(data.spec, data.format, kind, len(sizes), int(sum(sizes)), shard_count, mean,
                      percentile(sizes, 50), percentile(sizes, 99), lengths, verify, corrupt)


def check_shard(samples, name: str, spec: str, verify: bool, sizes: list[int], lengths: list[int],
                 corrupt: list[str]) -> None:
    """One shard's samples sized (token arrays' lengths too) and checked: a bad one is listed with verify, else
    the first stops the inspection naming it."""
    for s in samples:
        key = s["__key__"].decode("utf-8", "replace")
        why = check_sample(s, verify)
        if why:
            corrupt.append(f"{name}: {key}: {why}")
            if not verify:
                raise UserError(f"corrupt sample {key} in {name}: {why}; run `dataperf shards inspect --verify "
                                f"{spec}` to list every bad sample")
            continue
        sizes.append(sum(len(v) for k, v in s.items() if k != "__key__"))
        if "npy" in s:
            lengths.append(npy_length(s["npy"]))


def length_histogram(lengths: list[int], bins: int = 12) -> list[tuple[int, int, int]]:
    """(low, high, count) bins on a log scale, which shows a long tail better than linear bins."""
    if not lengths:
        return []
    lo, hi = max(min(lengths), 1), max(lengths)
    if lo == hi:
        return [(lo, hi, len(lengths))]
    edges = np.unique(np.round(np.geomspace(lo, hi + 1, bins + 1)).astype(int))
    counts, _ = np.histogram(lengths, bins=edges)
    return [(int(edges[i]), int(edges[i + 1]) - 1, int(c)) for i, c in enumerate(counts)]
