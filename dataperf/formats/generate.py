"""Synthetic datasets shaped like real training data: JPEG images, and token sequences whose lengths have
the long tail of real LLM corpora (p99 far above the median)."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from dataperf.errors import UserError
from dataperf.formats.dataset_dir import Manifest, staged_output, write_manifest
from dataperf.preflight import check_image_side

GEN_BYTES_PER_PIXEL = 40
MAX_TOKENS = 1 << 24


@dataclass
class ImageSpec:
    width: int = 256
    height: int = 256
    quality: int = 90
    classes: int = 1000


@dataclass
class TokenSpec:
    median_len: int = 512
    sigma: float = 0.9  # lognormal shape: 0.9 gives p99 around 8x the median
    min_len: int = 8
    max_len: int = 8192
    vocab: int = 32000


@dataclass
class Sample:
    key: str
    ext: str  # the payload's extension: jpg | npy
    payload: bytes
    label: int
    length: int | None = None  # tokens only


def jpeg_bytes(rng: np.random.Generator, spec: ImageSpec) -> bytes:
    """A real JPEG of natural-ish content: smooth random blobs plus noise, so it compresses like a photo."""
    coarse = rng.integers(0, 256, size=(max(spec.height // 16, 2), max(spec.width // 16, 2), 3), dtype=np.uint8)
    img = Image.fromarray(coarse).resize((spec.width, spec.height), Image.BILINEAR)
    arr = np.asarray(img, dtype=np.int16) + rng.integers(-24, 25, size=(spec.height, spec.width, 3))
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=spec.quality)
    return buf.getvalue()


def token_lengths(rng: np.random.Generator, spec: TokenSpec, n: int) -> np.ndarray:
    raw = rng.lognormal(mean=np.log(spec.median_len), sigma=spec.sigma, size=n)
    return np.clip(np.round(raw), spec.min_len, spec.max_len).astype(np.int64)


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def samples(kind: str, count: int, seed: int, image: ImageSpec, tokens: TokenSpec) -> Iterator[Sample]:
    """Deterministic stream of samples for a seed."""
    rng = np.random.default_rng(seed)
    if kind == "image":
        for i in range(count):
            yield Sample(f"{i:08d}", "jpg", jpeg_bytes(rng, image), int(rng.integers(0, image.classes)))
    elif kind == "tokens":
        lengths = token_lengths(rng, tokens, count)
        for i, n in enumerate(lengths):
            toks = rng.integers(0, tokens.vocab, size=int(n), dtype=np.int32)
            yield Sample(f"{i:08d}", "npy", npy_bytes(toks), int(rng.integers(0, 2)), int(n))
    else:
        raise UserError(f"unknown --kind {kind!r}; choose image or tokens")


def write_dataset(
    out: Path,
    kind: str,
    fmt: str,
    count: int,
    seed: int = 0,
    image: ImageSpec | None = None,
    tokens: TokenSpec | None = None,
    shard_mb: float = 64.0,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
    shards: int | None = None,
) -> Manifest:
    """Generate a dataset into `out` (atomically) and return its manifest. `shards` fixes the shard count
    (samples split evenly, shard_mb ignored): at least workers x ranks, or the extra workers read nothing."""
    if count <= 0:
        raise UserError(f"--count must be a positive number of samples, got {count}")
    if fmt not in ("files", "webdataset"):
        raise UserError(f"unknown --format {fmt!r}; choose files or webdataset")
    if shard_mb <= 0:
        raise UserError(f"--shard-mb must be positive, got {shard_mb}")
    image = image or ImageSpec()
    tokens = tokens or TokenSpec()
    if not math.isfinite(shard_mb):
        raise UserError(f"--shard-mb must be a finite size, got {shard_mb}")
    if kind == "image":
        if image.width < 8 or image.height < 8:
            raise UserError("--image-size must be at least 8 pixels")
        # generation holds ~40 bytes per pixel (int64 noise, int16 sum, the image, its JPEG)
        check_image_side(max(image.width, image.height), per_pixel_bytes=GEN_BYTES_PER_PIXEL)
    if kind == "tokens":
        if not (0 < tokens.min_len <= tokens.median_len <= tokens.max_len):
            raise UserError("token lengths need 0 < --min-len <= --median-len <= --max-len")
        if tokens.vocab < 1 or tokens.vocab > 2**31:
            raise UserError(f"--vocab must be between 1 and 2^31 (token ids are int32), got {tokens.vocab}")
        if not (math.isfinite(tokens.sigma) and tokens.sigma >= 0):
            raise UserError(f"--sigma (the lognormal shape) must be >= 0, got {tokens.sigma}")
        if tokens.max_len > MAX_TOKENS:
            raise UserError(f"--max-len {tokens.max_len} is above {MAX_TOKENS} tokens per sample; use a smaller one")
    check_disk_space(out, estimated_bytes(kind, fmt, count, image, tokens))
    gen = {"image": image.__dict__, "tokens": tokens.__dict__}[kind] if kind in ("image", "tokens") else {}
    stream = samples(kind, count, seed, image, tokens)
    with staged_output(out, overwrite) as tmp:
        m = Manifest(kind=kind, format=fmt, count=0, total_bytes=0, seed=seed, generator=dict(gen))
        if fmt == "files":
            _write_files(tmp, stream, m, progress)
        else:
            m.generator["shard_mb"] = shard_mb
            _write_shards(tmp, stream, m, shard_mb, progress, samples_per_shard(count, shards))
        write_manifest(tmp, m)
    return m


def estimated_bytes(kind: str, fmt: str, count: int, image: ImageSpec, tokens: TokenSpec) -> int:
    """A floor on the dataset's size on disk: what a sample cannot be smaller than, plus its container (three
    512-byte-aligned tar members per sample in a shard, one 4 KiB block per file)."""
    payload = image.width * image.height // 20 + 300 if kind == "image" else 4 * tokens.min_len + 128
    per_sample = payload + 3 * 1024 if fmt == "webdataset" else max(payload, 4096)
    return count * per_sample


def check_disk_space(out: Path, need: int) -> None:
    """Refuse, before writing anything, a dataset that cannot fit: a typo in --count must not fill the disk."""
    import shutil

    probe = Path(out).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need > free:
        raise UserError(f"this dataset needs at least {need / 2**30:.1f} GiB but {probe} has {free / 2**30:.1f} GiB "
                        "free; use a smaller --count or --image-size, or another --out")


def _record(m: Manifest, s: Sample) -> None:
    m.count += 1
    m.total_bytes += len(s.payload)
    m.sample_bytes.append(len(s.payload))
    if s.length is not None:
        m.token_lengths.append(s.length)


def _write_files(root: Path, stream: Iterator[Sample], m: Manifest, progress: Callable[[int], None] | None) -> None:
    for s in stream:
        name = f"{s.key}.{s.ext}"
        (root / name).write_bytes(s.payload)
        m.files.append(name)
        m.labels.append(s.label)
        _record(m, s)
        if progress:
            progress(1)


def samples_per_shard(count: int, shards: int | None) -> int:
    """ShardWriter's maxcount for an exact shard count (None: no count limit, size decides)."""
    if shards is None:
        return 10**9
    if shards <= 0 or shards > count:
        raise UserError(f"--shards must be between 1 and the sample count ({count}), got {shards}")
    return -(-count // shards)


def _write_shards(
    root: Path, stream: Iterator[Sample], m: Manifest, shard_mb: float, progress: Callable[[int], None] | None,
    maxcount: int = 10**9,
) -> None:
    import webdataset as wds

    pattern = str(root / "shard-%06d.tar")
    size = int(shard_mb * 1e6) if maxcount == 10**9 else 10**15
    with wds.ShardWriter(pattern, maxsize=size, maxcount=maxcount, verbose=0, mtime=0.0) as sink:
        for s in stream:
            meta = {"label": s.label}
            if s.length is not None:
                meta["length"] = s.length
            sink.write({"__key__": s.key, s.ext: s.payload, "cls": str(s.label).encode(),
                        "json": json.dumps(meta).encode()})
            _record(m, s)
            if progress:
                progress(1)
    m.shards = sorted(p.name for p in root.glob("shard-*.tar"))
