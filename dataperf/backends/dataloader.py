"""PyTorch DataLoader backends for the files, webdataset and image Parquet formats, built from a LoaderConfig.

Every batch is a dict with "n" (samples), "nbytes" (payload bytes) and "worker" (the DataLoader worker that
made it, -1 for the main process), so the runner counts samples, payload MiB/s and active workers the same way
whatever the format; decoded batches also carry tensors ("x", "y", "lengths").
"""

from __future__ import annotations

import ctypes
import functools
import io
import os
import random
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from dataperf import stages
from dataperf.data import SOURCE_FORMATS, Data
from dataperf.data.tario import PAYLOADS, no_payload
from dataperf.errors import TrialError
from dataperf.results import MIB, LoaderConfig

# a sweep tries more workers than cores on purpose: that is one of the things it measures
warnings.filterwarnings("ignore", message="This DataLoader will create .* worker processes")


def validate(cfg: LoaderConfig) -> None:
    """Reject configs torch would refuse, with the reason and the fix."""
    if cfg.batch_size <= 0:
        raise TrialError(f"batch_size must be positive, got {cfg.batch_size}")
    if cfg.num_workers < 0:
        raise TrialError(f"num_workers must be >= 0, got {cfg.num_workers}")
    if cfg.num_workers == 0 and cfg.prefetch_factor is not None:
        raise TrialError("prefetch_factor needs num_workers > 0 (the main process does not prefetch); "
                         "drop prefetch_factor or add workers")
    if cfg.num_workers == 0 and cfg.persistent_workers:
        raise TrialError("persistent_workers needs num_workers > 0")
    if cfg.prefetch_factor is not None and cfg.prefetch_factor <= 0:
        raise TrialError(f"prefetch_factor must be positive, got {cfg.prefetch_factor}")
    if cfg.cap_tokens is not None and cfg.cap_tokens <= 0:
        raise TrialError(f"cap_tokens must be positive, got {cfg.cap_tokens}")
    if cfg.shuffle_buffer is not None and cfg.shuffle_buffer <= 0:
        raise TrialError(f"shuffle_buffer must be positive, got {cfg.shuffle_buffer}")


_paced = threading.local()  # per thread: each DataLoader worker (process or thread) keeps its own schedule


def throttle(nbytes: int, mib_s: float | None, sample_cost_s: float | None = None) -> None:
    """Simulated slow storage: sleep as long as reading nbytes at mib_s would take (a read the worker waits
    for, so its decode comes on top). Then a fixed per-sample cost (known-answer tests, planted slowdowns) paced
    on this thread's own deadlines: back-to-back samples take exactly sample_cost_s each, however late each sleep
    wakes (a plain sleep per sample adds every wake-up's latency: 43.6 for 50 samples/s on a busy 2-core box),
    the worker's other work (read, decode) absorbed while it fits. Both sleep: no CPU, exact scaling with
    workers. The schedule restarts when the worker spent longer than the cost away from here since its last
    sample (it waited for the consumer): a late wake-up alone, however late, is caught up, not restarted from."""
    if mib_s:
        time.sleep(nbytes / (mib_s * MIB))
    if not sample_cost_s:
        return
    now = time.perf_counter()
    deadline = getattr(_paced, "deadline", None)
    if deadline is None or now - _paced.back > sample_cost_s:
        deadline = now
    _paced.deadline = deadline = deadline + sample_cost_s
    left = deadline - time.perf_counter()
    if left > 0:
        time.sleep(left)
    _paced.back = time.perf_counter()


class SampleDecoder:
    """Turns stored bytes into what the model eats (or, with decode off, passes bytes through)."""

    def __init__(self, cfg: LoaderConfig):
        self.decode = cfg.decode
        self.size = cfg.image_size
        self.cap = cfg.cap_tokens
        self.skip_corrupt = cfg.on_corrupt == "skip"
        from dataperf.backends.transforms import build

        self.transform = build(cfg.transform, cfg.image_size) if self.decode else None
        self.transform_spec = cfg.transform

    def __call__(self, ext: str, payload: bytes, label: int, where: str = "") -> dict[str, Any]:
        """The decoded sample; a corrupt one fails naming it (where: shard and key, or file), or with
        on_corrupt=skip is replaced by a marker that collate drops and counts (webdataset drops a None). The
        transform (--transform's, else the plain resize) runs on the decoded image after that: what it raises is
        its own failure, not the sample's. Decode and transform are booked as stages (dataperf.stages)."""
        if not self.decode:
            return {"nbytes": len(payload), "y": label, "payload": payload}
        t = time.perf_counter()
        try:
            out = self._decode(ext, payload, label)
        except Exception as e:
            if self.skip_corrupt:  # the marker says which and why, for `shards inspect --verify`
                return {"corrupt": True, "where": where, "why": f"{type(e).__name__}: {e}"}
            raise TrialError(f"corrupt sample {where}: {type(e).__name__}: {e}; list every bad sample with "
                             "`dataperf shards inspect --verify`, or pass --on-corrupt skip") from None
        t = stages.book("decode", t)
        if "image" in out:
            out["x"] = self.image_tensor(out.pop("image"), where)
            stages.book("transform", t)
        return out

    def image_tensor(self, img: Any, where: str) -> torch.Tensor:
        """A decoded PIL image as the model eats it: --transform's, else resized to image_size, CHW uint8."""
        if self.transform is None:
            from PIL import Image

            img = img.resize((self.size, self.size), Image.BILINEAR)
            return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)
        from dataperf.backends.transforms import apply

        return apply(self.transform, self.transform_spec, img, where)

    def _decode(self, ext: str, payload: bytes, label: int) -> dict[str, Any]:
        out: dict[str, Any] = {"nbytes": len(payload), "y": label}
        if ext == "npy":
            arr = np.load(io.BytesIO(payload), allow_pickle=False)
            if self.cap:
                arr = arr[: self.cap]
            out["x"] = torch.from_numpy(arr.astype(np.int64))
        else:
            from PIL import Image

            out["image"] = Image.open(io.BytesIO(payload)).convert("RGB")  # transformed by __call__
        return out


IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG", b"RIFF")  # JPEG, PNG, WebP (RIFF....WEBP) byte strings


class ReaderImages:
    """Another loader's samples (LitData, MDS) made what a model eats, as bench makes images: a PIL image (its
    reader decoded it; torch's collate refuses one) made a tensor at image_size, with --decode a byte string that
    holds a JPEG/PNG/WebP image decoded first; every other column as the reader gave it. A sample that does not
    decode fails the trial naming it (the reader's sample cannot be dropped from its own batching)."""

    def __init__(self, cfg: LoaderConfig):
        self.decode = cfg.decode
        self.decoder = SampleDecoder(replace(cfg, decode=True, on_corrupt="fail"))

    def __call__(self, sample: Any, where: str) -> Any:
        from PIL import Image

        if not isinstance(sample, dict):
            return sample
        out = dict(sample)
        for k, v in sample.items():
            if isinstance(v, Image.Image):
                t = time.perf_counter()
                out[k] = self.decoder.image_tensor(v.convert("RGB"), f"column {k} of {where}")
                stages.book("transform", t)
            elif self.decode and isinstance(v, bytes) and v.startswith(IMAGE_MAGIC):
                out[k] = self.decoder("jpg", v, 0, f"column {k} of {where}")["x"]
        return out


def collate(samples: list[dict[str, Any]] | list[bytes]) -> dict[str, Any]:
    """Stack images with their labels ("y"), right-pad token sequences to the batch's longest (counting their real
    tokens in "tokens"), keep raw bytes as a list ("payload": what raw reads deliver, and all a plain loop over the
    files hands on; their labels are left behind, read by nothing downstream: issue 30 measured dataperf's cost
    against such a loop); skipped corrupt samples (markers) are counted in "corrupt". The batch carries its stage
    books (dataperf.stages). A batch FilesDataset.__getitems__ read raw comes as its payloads alone."""
    t = time.perf_counter()
    info = get_worker_info()  # collate runs in the worker that fetched the samples
    if samples and type(samples[0]) is bytes:
        return stages.stamp({"n": len(samples), "worker": info.id if info is not None else -1,
                             "nbytes": sum(map(len, samples)), "corrupt": 0, "payload": samples}, t)
    kept = []
    for s in samples:
        if "corrupt" in s:
            continue
        books = s.pop("stage_s", None)  # loaded on a pipeline's own thread or process (samples.LoadSample)
        if books:
            stages.add(books)
        kept.append(s)
    batch: dict[str, Any] = {"n": len(kept), "worker": info.id if info is not None else -1,
                             "nbytes": sum(s["nbytes"] for s in kept), "corrupt": len(samples) - len(kept)}
    samples = kept
    if not samples:
        return stages.stamp(batch, t)
    if "payload" in samples[0]:
        batch["payload"] = [s["payload"] for s in samples]
        if "tokens" in samples[0]:  # raw token windows know their length
            batch["tokens"] = sum(s["tokens"] for s in samples)
        return stages.stamp(batch, t)
    batch["y"] = torch.tensor([s["y"] for s in samples], dtype=torch.long)
    if samples[0]["x"].dim() == 1:
        lengths = [len(s["x"]) for s in samples]
        x = torch.zeros(len(samples), max(lengths), dtype=torch.long)
        for i, s in enumerate(samples):
            x[i, : len(s["x"])] = s["x"]
        batch["x"] = x
        batch["lengths"] = torch.tensor(lengths, dtype=torch.long)
        batch["tokens"] = sum(lengths)  # real tokens, the padding left out
    else:
        batch["x"] = torch.stack([s["x"] for s in samples])
    return stages.stamp(batch, t)


class FilesDataset(Dataset):
    """One file per sample, read whole with plain open/read (what most training code does)."""

    def __init__(self, data: Data, cfg: LoaderConfig, opts: Any):
        self.paths = data.urls()
        self.labels = [int(y) for y in data.labels] if data.labels else [0] * len(self.paths)  # Python ints, once
        self.decoder = SampleDecoder(cfg)
        self.throttle_mib_s = opts.throttle_mib_s
        self.sample_cost_s = opts.sample_cost_s
        self.seek_s = opts.seek_s
        self.next_i: int | None = None  # this process's position in storage order (the simulated seek)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> dict[str, Any]:
        t = time.perf_counter()
        p = self.paths[i]
        if self.seek_s:
            if i != self.next_i:  # simulated seek: a read not next in storage order (tests)
                time.sleep(self.seek_s)
            self.next_i = i + 1
        with open(p, "rb") as f:
            payload = f.read()
        if self.throttle_mib_s or self.sample_cost_s:
            throttle(len(payload), self.throttle_mib_s, self.sample_cost_s)
        stages.book("read", t)
        return self.decoder(p.rpartition(".")[2], payload, self.labels[i], p)

    def __getitems__(self, idx: list[int]) -> list[dict[str, Any]] | list[bytes]:
        """A batch's samples (torch's fetcher calls this in place of one __getitem__ a sample). Raw, the batch's
        reads in one loop, booked once, the payloads as they are (collate takes a list of bytes whole): at 0
        workers on small raw files a sample's own bookkeeping was most of the harness's cost against a plain loop
        (issue 30: 0.83 of it). Decoded, sample by sample, each file read right before its decode, as a plain
        loop does: reading the batch's files first and decoding them after ran 3-4% faster than a plain loop (1
        worker, 64-px JPEGs; the same loop with that order matched it), a speed a user's loop would not see.
        Simulated costs (tests) go sample by sample too."""
        if self.decoder.decode or self.seek_s or self.throttle_mib_s or self.sample_cost_s:
            return [self[i] for i in idx]
        t = time.perf_counter()
        paths, payloads = self.paths, []
        for i in idx:
            with open(paths[i], "rb") as f:
                payloads.append(f.read())
        stages.book("read", t)
        return payloads


class ParquetImages(IterableDataset):
    """Image Parquet (data/hfparquet.py): the row groups are dealt out to ranks and workers as WebDataset deals
    shards (in a new order each epoch when shuffled, and the rows of a group shuffled too), each read with only
    its image and label columns, and every row decoded as an image file would be."""

    def __init__(self, data: Data, cfg: Any, rank: int = 0, world_size: int = 1, seed: int = 0):
        self.files = [f.path for f in data.files]
        self.units = [(fi, gi) for fi, groups in enumerate(data.row_groups) for gi in range(len(groups))]
        self.image, self.label = data.options["image"], data.options.get("label")
        self.decoder, self.shuffle = SampleDecoder(cfg), cfg.shuffle
        self.rank, self.world_size, self.seed, self.epoch = rank, world_size, seed, 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import pyarrow.parquet as pq

        wi = get_worker_info()
        n_workers, wid = (wi.num_workers, wi.id) if wi else (1, 0)
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        self.epoch += 1  # persistent workers keep this object: the next epoch gets a new order
        units = list(self.units)
        if self.shuffle:
            rng.shuffle(units)
        columns = [self.image] + ([self.label] if self.label else [])
        opened: dict[int, Any] = {}
        for fi, gi in units[self.rank * n_workers + wid::self.world_size * n_workers]:
            t = time.perf_counter()
            pf = opened.get(fi) or opened.setdefault(fi, pq.ParquetFile(self.files[fi]))
            table = pf.read_row_group(gi, columns=columns)
            images = table.column(self.image).to_pylist()
            labels = table.column(self.label).to_pylist() if self.label else [0] * len(images)
            stages.book("read", t)  # a row group at a time: its read lands in the batch that reached it
            rows = list(range(len(images)))
            if self.shuffle:
                rng.shuffle(rows)
            for r in rows:
                v = images[r]
                payload = v.get("bytes") if isinstance(v, dict) else v
                path = (v.get("path") if isinstance(v, dict) else None) or ""
                ext = path.rpartition(".")[2].lower() if "." in path else "jpg"
                yield self.decoder(ext, payload or b"", int(labels[r] or 0),
                                   f"row {r} of row group {gi} of {self.files[fi]}")


def wds_sample_fn(decoder: SampleDecoder, throttle_mib_s: float | None,
                  sample_cost_s: float | None = None) -> Callable[[dict], dict]:
    def fn(sample: dict[str, Any]) -> dict[str, Any]:
        ext = next((e for e in PAYLOADS if e in sample), None)
        if ext is None:
            raise TrialError(f"sample {sample.get('__key__')} in {sample.get('__url__')} has no payload: "
                             f"{no_payload([k for k in sample if not k.startswith('__')])}")
        payload = sample[ext]
        t = time.perf_counter()
        throttle(sum(len(v) for k, v in sample.items() if isinstance(v, bytes)), throttle_mib_s, sample_cost_s)
        stages.book("read", t)  # a simulated slow read (tests); the tar's own read is timed by timed_reads
        label = int(sample["cls"]) if "cls" in sample else 0
        return decoder(ext, payload, label, f"{sample.get('__key__')} in {sample.get('__url__')}")

    return fn


def timed_reads(samples: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A pipeline stage booking the time the stages before it take to give each sample (opening shards and
    reading and parsing the tar) as the read stage."""
    return stages.timed("read", samples)


def make_dataset(data: Data, cfg: LoaderConfig, opts: Any):
    """The torch Dataset for cfg.backend; opts (measure.trial.TrialOptions) gives rank, seed and simulated costs."""
    if data.format == "hf-parquet":
        return ParquetImages(data, cfg, opts.rank, opts.world_size, opts.seed)
    if data.format in SOURCE_FORMATS:  # token files and the user's own Dataset
        from dataperf.backends.datasets import make_source_dataset

        convert = ReaderImages(cfg) if "reader" in data.options else None
        return make_source_dataset(data, cfg, opts.rank, opts.world_size, opts.seed, convert)
    if cfg.backend == "files":
        if data.format != "files":
            raise TrialError(f"backend files asked for, but {data.spec} holds {data.format}; "
                             f"use --backend {data.format}")
        return FilesDataset(data, cfg, opts)
    if cfg.backend == "webdataset":
        if data.format != "webdataset":
            raise TrialError(f"backend webdataset asked for, but {data.spec} holds {data.format}; "
                             f"use --backend {data.format}")
        return webdataset_pipeline(data, cfg, opts)
    raise TrialError(f"unknown backend {cfg.backend!r} for the DataLoader; choose files or webdataset")


def webdataset_pipeline(data: Data, cfg: LoaderConfig, opts: Any):
    """Tar shards as a webdataset pipeline: the shard list (a new order every pass when shuffled), split by
    rank and worker, expanded into samples (local files by webdataset's own reader, remote streams opened by
    dataperf.data.remote), a sample shuffle buffer per worker, then decode."""
    import webdataset as wds

    from dataperf.backends.order import SampleBuffer, ShardOrder

    if data.remote:
        from dataperf.backends.datasets import remote_tar_samples

        expand = remote_tar_samples()
    else:
        expand = [wds.tarfile_to_samples()]
    buffer = [SampleBuffer(cfg.shuffle_buffer, opts.seed, opts.rank)] if cfg.shuffle and cfg.shuffle_buffer else []
    return wds.DataPipeline(ShardOrder(data.urls(), cfg.shuffle, opts.seed), wds.split_by_node, wds.split_by_worker,
                            *expand, timed_reads, *buffer,
                            wds.map(wds_sample_fn(SampleDecoder(cfg), opts.throttle_mib_s, opts.sample_cost_s)))


def make_loader(data: Data, cfg: LoaderConfig, opts: Any) -> DataLoader:
    """A real torch DataLoader; with world_size > 1 each rank reads its own split. Map-style data is read in
    the order of an access.Order sampler (a seeded permutation, or storage order), continued across
    repeats; an IterableDataset in its own order."""
    from dataperf.backends.datasets import collate_for
    from dataperf.backends.order import Order

    validate(cfg)
    ds = make_dataset(data, cfg, opts)
    sampler = None
    if not isinstance(ds, IterableDataset):
        sampler = Order(len(ds), cfg.shuffle, opts.seed, opts.rank, opts.world_size)
    g = torch.Generator()
    g.manual_seed(opts.seed)
    return DataLoader(ds, batch_size=cfg.batch_size, collate_fn=collate_for(data, ds, collate), sampler=sampler,
                      generator=g, **worker_kwargs(cfg))


def worker_kwargs(cfg: LoaderConfig) -> dict[str, Any]:
    """The DataLoader's worker knobs from a config, for every backend built on a torch DataLoader (torch
    refuses prefetch_factor and persistent_workers without workers; pinning needs CUDA)."""
    kw: dict[str, Any] = {"num_workers": cfg.num_workers, "pin_memory": cfg.pin_memory and torch.cuda.is_available()}
    if cfg.num_workers > 0:
        kw.update(prefetch_factor=cfg.explicit().prefetch_factor, persistent_workers=cfg.persistent_workers,
                  worker_init_fn=ends_with_parent())
    return kw


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def ends_with_parent() -> Callable[[int], None]:
    """A worker_init_fn for every DataLoader dataperf starts: the worker ends when this process dies. torch's
    own check (each 5 s, between samples) compares the worker's parent with the one it read at its start, after
    worker_init_fn: a worker forked as this process was killed read the reaper there, and waits on its index
    queue forever (issue 54's kill loop: a SIGKILLed sweep's worker alive minutes later, holding the caller's
    stderr, so a `| tee` never ends). The kernel tells this one (PR_SET_PDEATHSIG), at once, even mid-sample;
    one whose parent was gone before it asked ends there."""
    return functools.partial(_end_with_parent, os.getpid())


def _end_with_parent(parent: int, worker_id: int) -> None:
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl (not Linux): torch's own check is all there is
        return
    if os.getppid() != parent:
        os._exit(1)
