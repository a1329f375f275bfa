"""What a dataset holds, read from the data itself (so a corrupt shard is found here, not mid-training)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dataperf.errors import UserError
from dataperf.formats.dataset_dir import MANIFEST, read_manifest
from dataperf.formats.tario import iter_tar_samples
from dataperf.records import percentile


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

    @property
    def token_p50(self) -> float:
        return percentile(self.token_lengths, 50)

    @property
    def token_p99(self) -> float:
        return percentile(self.token_lengths, 99)


def npy_length(data: bytes) -> int:
    arr = np.load(io.BytesIO(data), allow_pickle=False)
    return int(arr.shape[0]) if arr.ndim else 1


def inspect_dataset(root: Path) -> Inspection:
    """Count and size every sample; tar shards are read end to end, so damage is reported by file name."""
    if not root.exists():
        raise UserError(f"dataset path does not exist: {root}")
    tars = sorted(root.glob("*.tar"))
    if (root / MANIFEST).is_file():
        m = read_manifest(root)
        fmt, kind = m.format, m.kind
    elif tars:
        fmt, kind = "webdataset", "unknown"
    else:
        raise UserError(f"{root} has neither a {MANIFEST} nor .tar shards; not a dataset")
    sizes: list[int] = []
    lengths: list[int] = []
    if fmt == "webdataset":
        for t in tars:
            for s in iter_tar_samples(t):
                sizes.append(sum(len(v) for k, v in s.items() if k != "__key__"))
                if "npy" in s:
                    lengths.append(npy_length(s["npy"]))
        shard_count = len(tars)
    else:
        for name in m.files:
            p = root / name
            if not p.is_file():
                raise UserError(f"{p} is listed in the manifest but missing; regenerate the dataset")
            sizes.append(p.stat().st_size)
        lengths = list(m.token_lengths)
        shard_count = 0
    if not sizes:
        raise UserError(f"{root} holds no samples")
    if lengths:
        kind = "tokens"
    return Inspection(str(root), fmt, kind, len(sizes), int(sum(sizes)), shard_count,
                      float(np.mean(sizes)), percentile(sizes, 50), percentile(sizes, 99), lengths)


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
