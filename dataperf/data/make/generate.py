"""Synthetic datasets shaped like real training data: JPEG images (fixed-size, or photo-like with ImageNet's
size distribution: `--like imagenet`, made in parallel), and token sequences whose lengths have the long tail
of real LLM corpora (p99 far above the median)."""

from __future__ import annotations

import io
import itertools
import json
import math
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from dataperf.data.manifest import Manifest, staged_output, write_manifest
from dataperf.data.sizes import check_image_side
from dataperf.errors import UserError

GEN_BYTES_PER_PIXEL = 40
MAX_TOKENS = 1 << 24
LIKE = ("imagenet",)
LIKE_CHUNK = 16  # images per unit of work handed to a generation process
LIKE_MIN_BYTES = 30_000  # a floor on the mean JPEG of --like imagenet (its target is ~110 KB), for the disk check


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


def default_jobs() -> int:
    """The cores this process may use (affinity and cgroup cpusets included where the OS reports them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def like_samples(count: int, seed: int, quality: int, jobs: int) -> Iterator[Sample]:
    """ImageNet-like images in index order, made by `jobs` processes. At most 2 x jobs chunks are in flight, so
    memory stays bounded whatever the count; image i depends only on (seed, i), so any jobs gives the same
    bytes. Processes are spawned, not forked: the parent may hold threads (the progress bar's)."""
    from dataperf.data.make import natural

    chunks = iter([(a, min(a + LIKE_CHUNK, count)) for a in range(0, count, LIKE_CHUNK)])

    def as_samples(start: int, made: list[natural.Like]) -> Iterator[Sample]:
        for i, x in enumerate(made, start):
            yield Sample(f"{i:08d}", "jpg", x.jpeg, x.label)

    if jobs == 1:
        for a, b in chunks:
            yield from as_samples(a, natural.make_chunk(seed, a, b, quality))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # workers ignore Ctrl-C: the parent stops them (cancelling what is queued), so one interrupt, one message
    ex = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=signal.signal,
                             initargs=(signal.SIGINT, signal.SIG_IGN))
    try:
        pending = deque((a, ex.submit(natural.make_chunk, seed, a, b, quality))
                        for a, b in itertools.islice(chunks, 2 * jobs))
        while pending:
            a, fut = pending.popleft()
            nxt = next(chunks, None)
            if nxt is not None:
                pending.append((nxt[0], ex.submit(natural.make_chunk, seed, nxt[0], nxt[1], quality)))
            yield from as_samples(a, fut.result())
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


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


@dataclass
class Generated:
    """A finished dataset and how fast it was made: wall time from the first sample asked for to the manifest
    written (generation, encoding and writing, process start-up included)."""

    manifest: Manifest
    wall_s: float
    jobs: int

    @property
    def samples_per_s(self) -> float:
        return self.manifest.count / max(self.wall_s, 1e-9)

    @property
    def mib_per_s(self) -> float:
        return self.manifest.total_bytes / 2**20 / max(self.wall_s, 1e-9)


def write_dataset(*args: Any, **kwargs: Any) -> Manifest:
    """generate_dataset's manifest alone, for callers that do not report the generation rate."""
    return generate_dataset(*args, **kwargs).manifest


def generate_dataset(
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
    like: str | None = None,
    jobs: int | None = None,
) -> Generated:
    """Generate a dataset into `out` (atomically). `shards` fixes the shard count (samples split evenly,
    shard_mb ignored): at least workers x ranks, or the extra workers read nothing. `like="imagenet"` makes
    photo-like JPEGs with ImageNet's size distribution (data/make/natural.py) in `jobs` processes (default: the
    cores); without it images are image.width x image.height, made in this process."""
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
    if like is not None:
        _check_like(like, kind, jobs)
    elif jobs is not None:
        raise UserError("--jobs sets the processes of --like generation; add --like imagenet or drop --jobs")
    jobs = jobs or default_jobs()
    if kind == "image" and like is None:
        if image.width < 8 or image.height < 8:
            raise UserError(f"--image-size must be at least 8 pixels, got {min(image.width, image.height)}")
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
    check_disk_space(out, estimated_bytes(kind, fmt, count, image, tokens, like))
    if like is not None:
        from dataperf.data.make import natural

        gen = {"like": like, "quality": image.quality, "classes": natural.CLASSES, "subsampling": "4:4:4"}
        stream = like_samples(count, seed, image.quality, jobs)
    else:
        gen = {"image": image.__dict__, "tokens": tokens.__dict__}[kind] if kind in ("image", "tokens") else {}
        stream = samples(kind, count, seed, image, tokens)
    t0 = time.perf_counter()
    with staged_output(out, overwrite) as tmp:
        m = Manifest(kind=kind, format=fmt, count=0, total_bytes=0, seed=seed, generator=dict(gen))
        if fmt == "files":
            _write_files(tmp, stream, m, progress)
        else:
            m.generator["shard_mb"] = shard_mb
            _write_shards(tmp, stream, m, shard_mb, progress, samples_per_shard(count, shards))
        write_manifest(tmp, m)
    return Generated(m, time.perf_counter() - t0, jobs if like is not None else 1)


def _check_like(like: str, kind: str, jobs: int | None) -> None:
    from dataperf.data.make import natural

    if like not in LIKE:
        raise UserError(f"unknown --like {like!r}; choose one of {', '.join(LIKE)}")
    if kind != "image":
        raise UserError(f"--like {like} makes images; use --kind image (or drop --like for tokens)")
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs must be at least 1, got {jobs}")
    # the largest image the distribution draws, at ~40 bytes per pixel while it is made, in every process
    check_image_side(natural.MAX_SIDE, "--like imagenet's largest image", per_pixel_bytes=GEN_BYTES_PER_PIXEL)


def estimated_bytes(kind: str, fmt: str, count: int, image: ImageSpec, tokens: TokenSpec,
                    like: str | None = None) -> int:
    """A floor on the dataset's size on disk: what a sample cannot be smaller than, plus its container (three
    512-byte-aligned tar members per sample in a shard, one 4 KiB block per file)."""
    if like is not None:
        payload = LIKE_MIN_BYTES
    else:
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
        raise UserError(f"this dataset needs at least {size_text(need)} but {probe} has {size_text(free)} free; use "
                        "a smaller --count or --image-size, or another --out")


def size_text(n: int) -> str:
    """Bytes in the largest unit that keeps a figure of at least 1 (KiB up to GiB): '0.0 GiB' says nothing."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 2**10:.1f} KiB"


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
