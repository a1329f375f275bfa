"""The dataset's samples as (file, offset, size) references, and the converted stores other backends read.

Every backend beyond the DataLoader reads the same samples: the thread/process pipelines (spdl, torchdata)
read them in place through these references (one pread per sample, from the dataset's own files or tar
shards); the streaming formats (litdata, mosaic streaming) read a copy converted once and cached, whose
conversion time and size go into the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dataperf import stages
from dataperf.backends.dataloader import SampleDecoder, throttle
from dataperf.data.manifest import MANIFEST, Manifest
from dataperf.data.tario import PAYLOADS, corrupt, no_payload, split_key
from dataperf.errors import TrialError
from dataperf.results import LoaderConfig

CACHE_DIR = ".dataperf-cache"
DONE = "conversion.json"


@dataclass(frozen=True)
class SampleRef:
    """Where one sample's payload lies: bytes [offset, offset+size) of path."""

    path: str
    offset: int
    size: int
    ext: str
    label: int


def sample_refs(root: Path, m: Manifest) -> list[SampleRef]:
    """Every sample of the dataset in manifest order (files: one per file; shards: the payload member)."""
    if m.format == "files":
        labels = m.labels or [0] * len(m.files)
        out = []
        for f, lab in zip(m.files, labels, strict=True):
            p = root / f
            out.append(SampleRef(str(p), 0, p.stat().st_size, f.rpartition(".")[2], int(lab)))
        return out
    out = []
    for shard in m.paths(root):
        out.extend(_tar_refs(shard))
    return out


def _tar_refs(shard: Path) -> list[SampleRef]:
    """Payload offsets of one tar shard from its headers (the data is skipped, except each tiny .cls)."""
    samples: dict[str, dict[str, Any]] = {}
    try:
        with tarfile.open(shard, mode="r:") as tf:
            for mem in tf:
                if not mem.isfile():
                    continue
                key, ext = split_key(mem.name)
                s = samples.setdefault(key, {"members": []})
                s["members"].append(ext)
                if ext == "cls":
                    f = tf.extractfile(mem)
                    s["label"] = int((f.read() if f else b"0").strip() or 0)
                elif ext in PAYLOADS:
                    s["ref"] = (mem.offset_data, mem.size, ext)
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise corrupt(shard, e) from None
    out = []
    for key, s in samples.items():
        if "ref" not in s:
            raise TrialError(f"sample {key} in {shard} has no payload: {no_payload(s['members'])}")
        off, size, ext = s["ref"]
        out.append(SampleRef(str(shard), off, size, ext, s.get("label", 0)))
    return out


class LoadSample:
    """Read one referenced sample and decode it like the DataLoader backends do (picklable for processes)."""

    def __init__(self, cfg: LoaderConfig, throttle_mib_s: float | None = None, sample_cost_s: float | None = None):
        self.decoder = SampleDecoder(cfg)
        self.throttle_mib_s = throttle_mib_s
        self.sample_cost_s = sample_cost_s

    def __call__(self, ref: SampleRef) -> dict[str, Any]:
        """The sample, carrying its own stage books: a pipeline may load it on one thread (or process) and batch
        it on another."""
        t = time.perf_counter()
        with open(ref.path, "rb") as f:
            payload = os.pread(f.fileno(), ref.size, ref.offset)
        if len(payload) != ref.size:
            raise TrialError(f"{ref.path} is truncated: {len(payload)} of {ref.size} bytes at {ref.offset}")
        throttle(ref.size, self.throttle_mib_s, self.sample_cost_s)
        stages.book("read", t)
        out = self.decoder(ref.ext, payload, ref.label)
        out["stage_s"] = stages.take()
        return out


class RankSamples:
    """What the in-place thread/process pipelines (SPDL, torchdata) share: this rank's sample references, in
    the order of an access.Order (shuffled or storage order, continued across repeats), and how to load one."""

    def __init__(self, root: Path, m: Manifest, cfg: LoaderConfig, opts: Any, worker_type: str):
        from dataperf.backends.order import Order

        if cfg.batch_size <= 0:
            raise TrialError(f"batch_size must be positive, got {cfg.batch_size}")
        self.cfg, self.worker_type = cfg, worker_type
        self.all_refs = sample_refs(root, m)
        self.order = Order(len(self.all_refs), cfg.shuffle, opts.seed, opts.rank, opts.world_size)
        self.load = LoadSample(cfg, opts.throttle_mib_s, opts.sample_cost_s)

    def refs(self) -> Iterator[SampleRef]:
        """This rank's references for one pass (one repeat), drawn lazily: what the pipeline does not pull
        is left for the next repeat."""
        return (self.all_refs[i] for i in self.order)


def raw_sample(ref: SampleRef) -> dict[str, Any]:
    """A sample as the streaming formats store it: payload bytes, extension, label."""
    with open(ref.path, "rb") as f:
        payload = os.pread(f.fileno(), ref.size, ref.offset)
    return {"payload": payload, "ext": ref.ext, "label": ref.label}


@dataclass
class Store:
    """A converted copy of the dataset for one backend, and what making it cost."""

    path: Path
    conversion_s: float
    store_mib: float
    samples: int
    reused: bool

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.rglob("*") if p.is_file() and p.name != DONE)

    def info(self) -> dict[str, Any]:
        return {"store": str(self.path), "conversion_s": self.conversion_s, "store_mib": self.store_mib,
                "store_samples": self.samples, "store_reused": self.reused}


def dataset_id(root: Path, m: Manifest) -> str:
    """Changes whenever the dataset does: its manifest lists every file and size (a dataperf dataset's file, or
    the one built in memory for a user's folder)."""
    on_disk = root / MANIFEST
    raw = on_disk.read_bytes() if on_disk.is_file() else json.dumps(asdict(m), sort_keys=True).encode()
    return hashlib.sha1(raw).hexdigest()[:12]


def store_dir(root: Path, name: str, m: Manifest) -> Path:
    """Beside a dataperf dataset when it is writable, else (a user's own folder, which dataperf does not write
    into, or a read-only one) under $DATAPERF_CACHE_DIR (or ~/.cache/dataperf)."""
    tag = f"{name}-{dataset_id(root, m)}"
    beside = root / CACHE_DIR
    if (root / MANIFEST).is_file() and os.access(root, os.W_OK):
        return beside / tag
    from dataperf.data.facts import cache_home

    return cache_home() / hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12] / tag


def converted(root: Path, m: Manifest, name: str, write: Callable[[list[SampleRef], Path], None]) -> Store:
    """The backend's store, converted once (into a temp folder renamed into place) and reused after."""
    out = store_dir(root, name, m)
    done = out / DONE
    if done.is_file():
        d = json.loads(done.read_text(encoding="utf-8"))
        return Store(out, d["conversion_s"], d["store_mib"], d["samples"], reused=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        refs = sample_refs(root, m)
        t0 = time.perf_counter()
        write(refs, tmp / "data")
        secs = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in (tmp / "data").rglob("*") if p.is_file())
        (tmp / "data" / DONE).write_text(json.dumps({"conversion_s": secs, "store_mib": size / 2**20,
                                                     "samples": len(refs)}), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        (tmp / "data").rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Store(out, secs, size / 2**20, len(refs), reused=False)
