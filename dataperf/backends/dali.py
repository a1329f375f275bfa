"""NVIDIA DALI as a loader backend: fn.readers.file / fn.readers.numpy for the files format,
fn.readers.webdataset for shards, JPEG decode on the CPU or the GPU ("mixed").

Wrapped to yield the same batch dicts as the DataLoader backends ("n", "nbytes", "x", "y"), so the same
runner, records and collectors apply. Runs CPU-only (device_id=None) where there is no GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dataperf.data.manifest import Manifest
from dataperf.errors import TrialError
from dataperf.results import DEFAULT_SHUFFLE_BUFFER, LoaderConfig

READER = "Reader"
STAGE_SAMPLES = 128  # the stage probe's samples a cut (after a batch of warm-up)


def import_dali():
    try:
        import nvidia.dali as dali
        import nvidia.dali.fn  # noqa: F401
    except ImportError as e:
        raise TrialError(f"DALI is not installed ({e}); pip install 'dataperf[dali]' "
                         "(nvidia-dali-cuda120)") from None
    return dali


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


class DaliLoader:
    """One DALI pipeline, iterated epoch by epoch like a DataLoader."""

    def __init__(self, root: Path, m: Manifest, cfg: LoaderConfig, rank: int = 0, world_size: int = 1,
                 seed: int = 0):
        dali = import_dali()
        if cfg.batch_size <= 0:
            raise TrialError(f"batch_size must be positive, got {cfg.batch_size}")
        threads = cfg.dali_num_threads or 2
        depth = cfg.dali_prefetch_queue_depth or 2
        decode_dev = cfg.dali_decode_device or "cpu"
        if threads <= 0 or depth <= 0:
            raise TrialError("DALI num_threads and prefetch_queue_depth must be positive")
        if decode_dev not in ("cpu", "mixed"):
            raise TrialError(f"DALI decode device must be cpu or mixed, got {decode_dev!r}")
        has_gpu = gpu_available()
        if decode_dev == "mixed" and not has_gpu:
            raise TrialError("DALI decode device 'mixed' (GPU decode) needs a CUDA GPU; use cpu on this machine")
        self.device_id = rank % max(1, _gpu_count()) if has_gpu else None
        self.cfg, self.m, self.root = cfg, m, root
        self.gpu_out = decode_dev == "mixed"
        self.pipe = self._pipeline(dali, threads, depth, seed, rank, world_size)
        self.epoch_samples = self.pipe.epoch_size(READER)
        if world_size > 1:
            self.epoch_samples = math.ceil(self.epoch_samples / world_size)

    def _pipeline(self, dali, threads: int, depth: int, seed: int, rank: int = 0, world_size: int = 1,
                  cut: str | None = None, serial: bool = False):
        """The built pipeline: read, decode, transform; `cut` after "read" or "decode" outputs that stage's
        result instead (the stage probe), `serial` runs its stages one after another on the calling thread's
        schedule (no pipelining, no async execution: their times add up instead of overlapping)."""
        fn = dali.fn
        decode_dev = self.cfg.dali_decode_device or "cpu"
        run = {"exec_pipelined": False, "exec_async": False} if serial else {}
        pipe = dali.pipeline.Pipeline(batch_size=self.cfg.batch_size, num_threads=threads, device_id=self.device_id,
                                      prefetch_queue_depth=depth, seed=seed or 1, **run)
        with pipe:
            data, label = self._read(fn, rank, world_size)
            size = data.shape()
            if cut == "read":
                x = fn.pad(data, fill_value=0)
            elif cut == "decode":
                x = fn.decoders.image(data, device=decode_dev, output_type=dali.types.RGB)
            else:
                x = self._decode(dali, data, decode_dev)
            pipe.set_outputs(x, label, size)
        try:
            pipe.build()
        except RuntimeError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            why = next((ln for ln in lines if "failed" in ln or "install" in ln.lower()), lines[-1] if lines else "")
            raise TrialError(f"DALI pipeline could not be built: {why[:300]}") from None
        return pipe

    def stage_ms(self, samples: int = STAGE_SAMPLES) -> tuple[dict[str, float], str]:
        """Where a sample's time goes in DALI's own pipeline, which keeps no stage books dataperf can read:
        differential runs (as DS-Analyzer splits time). The pipeline is built cut after its reader, cut after
        its decoder, and whole; each runs serially on one thread over the same samples in storage order, so a
        sample's stages add up; a stage's ms a sample is its cut's time less the cut before. Images decoded on
        the CPU only: a GPU decode's time is not the host's, and tokens have no decode; ({}, why) otherwise. Built
        with shuffle off (backends' _dali_stages does so), the cuts read the same samples."""
        if self.m.kind != "image" or not self.cfg.decode:
            return {}, "DALI's stages are probed for decoded images only"
        if self.gpu_out:
            return {}, "DALI decodes on the GPU (mixed): its stages are not timed on the host"
        dali = import_dali()
        batches = max(2, math.ceil(samples / self.cfg.batch_size))
        per = {cut: self._serial_ms(dali, cut, batches) for cut in ("read", "decode", None)}
        ms = {"read": per["read"], "decode": max(per["decode"] - per["read"], 0.0),
              "transform": max(per[None] - per["decode"], 0.0)}
        n = batches * self.cfg.batch_size
        return ms, (f"DALI keeps no stage books: read, decode and transform timed apart by differential runs of its "
                    f"own pipeline (cut after the reader, after the decoder, and whole; serial, one thread, "
                    f"{n} samples each after one batch of warm-up)")

    def _serial_ms(self, dali, cut: str | None, batches: int) -> float:
        """ms a sample of the pipeline cut at `cut`, run serially on one thread: the first batch (start-up) left
        out."""
        import time

        pipe = self._pipeline(dali, 1, 1, 1, cut=cut, serial=True)
        pipe.run()
        t0 = time.perf_counter()
        for _ in range(batches):
            pipe.run()
        return (time.perf_counter() - t0) * 1000 / (batches * self.cfg.batch_size)

    def _read(self, fn, rank: int, world_size: int):
        # cold trials read with read(): DALI's default mmap keeps pages mapped, so eviction cannot drop them
        shard = {"shard_id": rank, "num_shards": world_size, "name": READER, "pad_last_batch": False,
                 "dont_use_mmap": self.cfg.cache == "cold", **shuffle_args(self.cfg)}
        if self.m.format == "files":
            files = [str(p) for p in self.m.paths(self.root)]
            if self.m.kind == "tokens":
                return fn.readers.numpy(files=files, **shard), _label0(fn)
            labels = self.m.labels or [0] * len(files)
            return fn.readers.file(files=files, labels=labels, **shard)
        ext = "npy" if self.m.kind == "tokens" else "jpg"
        paths = self.m.paths(self.root)
        data = fn.readers.webdataset(paths=[str(p) for p in paths], index_paths=[str(p) for p in index_files(paths)],
                                     ext=[ext], **shard)
        return data, _label0(fn)

    def _decode(self, dali, data, device: str):
        fn, types = dali.fn, dali.types
        if self.m.kind == "tokens":
            return fn.pad(data, fill_value=0)  # npy passthrough (files) or raw bytes (shards), padded like collate
        if not self.cfg.decode:
            return fn.pad(data, fill_value=0)  # encoded JPEG bytes reach the consumer undecoded
        img = fn.decoders.image(data, device=device, output_type=types.RGB)
        s = self.cfg.image_size
        img = fn.resize(img, resize_x=s, resize_y=s)
        return fn.crop_mirror_normalize(img, dtype=types.UINT8, output_layout="CHW")

    def _stored_bytes(self, size, n: int) -> int:
        """Bytes read for the batch: encoded sizes, or int32 elements for the numpy reader's arrays."""
        elems = int(size.as_array()[:n].prod(axis=1).sum())
        return elems * 4 if (self.m.format == "files" and self.m.kind == "tokens") else elems

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import numpy as np
        import torch

        left = self.epoch_samples
        while left > 0:
            x, y, size = self.pipe.run()
            n = min(left, self.cfg.batch_size)
            left -= n
            batch: dict[str, Any] = {"n": n, "nbytes": self._stored_bytes(size, n)}
            if self.cfg.decode:
                batch["x"] = _to_torch(x, self.gpu_out)[:n]
                batch["y"] = torch.from_numpy(np.asarray(y.as_array()).reshape(-1)[:n].astype(np.int64))
            yield batch


def shuffle_args(cfg: LoaderConfig) -> dict[str, Any]:
    """DALI's reader shuffle: random_shuffle draws each sample from a buffer of initial_fill samples; the
    file reader also permutes its file list once (a fixed order every epoch: random small-file reads), the
    webdataset reader reads its shards in order and shuffles through the buffer only."""
    if not cfg.shuffle:
        return {"random_shuffle": False}
    if cfg.shuffle_buffer is not None and cfg.shuffle_buffer <= 0:
        raise TrialError(f"shuffle_buffer must be positive, got {cfg.shuffle_buffer}")
    return {"random_shuffle": True, "initial_fill": cfg.shuffle_buffer or DEFAULT_SHUFFLE_BUFFER}


def index_files(shards: list[Path]) -> list[Path]:
    """DALI's webdataset index for each shard (made once with DALI's own wds2idx, kept beside the data), so
    the reader does not scan every tar at start-up."""
    import tempfile

    try:
        from wds2idx import IndexCreator  # shipped beside DALI in its wheel
    except ImportError:
        return []  # DALI then infers the index by scanning each tar at start-up
    out = []
    for shard in shards:
        d = shard.parent / ".dali-index"
        try:
            d.mkdir(exist_ok=True)
        except OSError:
            d = Path(tempfile.gettempdir()) / "dataperf-dali-index"
            d.mkdir(exist_ok=True)
        idx = d / f"{shard.name}.idx"
        if not idx.exists() or idx.stat().st_mtime < shard.stat().st_mtime:
            tmp = idx.with_suffix(".partial")
            with IndexCreator(str(shard), str(tmp), verbose=False) as ic:
                ic.create_index()
            tmp.rename(idx)
        out.append(idx)
    return out


def _label0(fn):
    return fn.constant(idata=0, shape=[1])


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def _to_torch(tl, on_gpu: bool):
    """A dense DALI TensorList as a torch tensor (DLPack on the GPU, numpy on the CPU)."""
    import numpy as np
    import torch

    t = tl.as_tensor()
    if not on_gpu:
        return torch.from_numpy(np.array(t))
    try:
        return torch.from_dlpack(t)
    except (TypeError, AttributeError, RuntimeError):  # DALI builds without DLPack export: copy on the device
        from nvidia.dali.plugin.pytorch import feed_ndarray, to_torch_type

        out = torch.empty(t.shape(), dtype=to_torch_type[t.dtype], device="cuda")
        feed_ndarray(t, out, cuda_stream=torch.cuda.current_stream())
        return out
