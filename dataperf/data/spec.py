"""What DATA is, as a value: `Data` (where it lives, its kind and format, its files and sizes) and `DataFile`.
Resolving a spec into one is `dataperf.data.resolve`; every module of this package builds on these."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dataperf.data.manifest import Manifest

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")
# the encodings LitData and MDS writers store an image in; their readers hand the sample back as a PIL image
IMAGE_ENCODINGS = ("pil", "jpeg", "png", "webp", "jpeg_array", "jpegarray", "pil_array")
TOKEN_FORMATS = {".bin": "tokens-bin", ".npy": "npy", ".jsonl": "jsonl", ".parquet": "parquet"}
# formats the DataLoader backend reads through dataperf.backends.datasets (files/webdataset stay in loaders)
SOURCE_FORMATS = ("tokens-bin", "npy", "jsonl", "parquet", "hf-parquet", "user-dataset")
REMOTE_SCHEMES = ("http://", "https://", "s3://")
# how a DataLoader's workers are dealt a format's data: whole shards in turn (shard i to worker i mod W), or batches
# in turn (a map-style dataset); a format not here splits its own work (an IterableDataset) or is not known to
DEALT_BY = {"webdataset": "shard", "files": "batch", "tokens-bin": "batch", "npy": "batch"}
WINDOWED_FORMATS = ("tokens-bin", "npy")  # flat token streams, cut into --seq-len windows


@dataclass
class DataFile:
    """One data file or shard: a local path or a URL, with its size when it was cheap to learn."""

    path: str
    size_bytes: int | None = None


@dataclass
class Data:
    """DATA as the user gave it, resolved: everything a trial needs to build its loader and manage caches."""

    spec: str  # what the user typed
    location: str  # the folder (local) or the URL of the first shard (remote)
    kind: str  # image | tokens | unknown
    format: str  # files | webdataset | tokens-bin | npy | jsonl | parquet | hf-parquet | user-dataset
    files: list[DataFile] = field(default_factory=list)
    count: int | None = None  # samples, when known without reading the data
    labels: list[int] = field(default_factory=list)  # files format: one label per file
    classes: list[str] = field(default_factory=list)  # ImageFolder: class names, label = index
    remote: bool = False
    options: dict[str, str] = field(default_factory=dict)  # from SPEC#key=value: dtype, tokenizer, field
    manifest: Manifest | None = None  # a dataperf dataset's own manifest (or one built in memory for DALI)
    factory: str | None = None  # user-dataset: MODULE:FACTORY
    notes: list[str] = field(default_factory=list)  # what resolving found worth saying in every trial's record
    left_out: list[str] = field(default_factory=list)  # what DATA holds that is not read: other splits, stray files
    row_groups: list[list[int]] = field(default_factory=list)  # hf-parquet: rows of each row group, file by file
    columns: dict[str, str] = field(default_factory=dict)  # another loader's folder: each column's stored type
    _paths: tuple[Path, ...] | None = field(default=None, init=False, repr=False, compare=False)  # local_paths'

    @property
    def root(self) -> Path:
        return Path(self.location)

    @property
    def is_user(self) -> bool:
        """A user's own torch Dataset (--dataset MODULE:FACTORY): dataperf knows neither its files nor its decode."""
        return self.format == "user-dataset"

    @property
    def sharded(self) -> bool:
        """Stored in WebDataset tar shards, which a loader reads (and deals to workers) whole."""
        return self.format == "webdataset"

    @property
    def shards(self) -> int | None:
        """How many tar shards the data is stored in; None when it is not sharded."""
        return len(self.files) if self.sharded else None

    @property
    def windowed(self) -> bool:
        """A flat token stream (.bin, 1-d .npy), cut into --seq-len windows; other data has no seq_len."""
        return self.format in WINDOWED_FORMATS

    @property
    def dealt_by(self) -> str | None:
        """How a DataLoader's workers are dealt this data: "shard" (whole shards in turn), "batch" (batches in
        turn, a map-style dataset), or None (it splits its own work, or the split is not known)."""
        return DEALT_BY.get(self.format)

    @property
    def total_bytes(self) -> int | None:
        sizes = [f.size_bytes for f in self.files]
        return None if not sizes or any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]

    def local_paths(self) -> list[Path]:
        """Files whose pages the cache control drops or pre-reads: none for remote data or a user's Dataset."""
        if self.remote or self.is_user:
            return []
        if self._paths is None:  # once: 2,000 new Paths a trial pushed the collector into full collections
            self._paths = tuple(Path(f.path) for f in self.files)
        return list(self._paths)

    @property
    def cache_managed(self) -> bool:
        """Whether dataperf can drop or pre-read this data's pages: local files yes; remote data and a user's
        Dataset (whose files dataperf does not know) no."""
        return not self.remote and not self.is_user

    @property
    def cache_mode(self) -> str:
        """What a trial's cache_mode records when the page cache is not dataperf's to manage."""
        return "remote" if self.remote else "unmanaged"

    def cache_note(self) -> str:
        if self.remote:
            return ("remote data: samples come over the network each repeat, not from the page cache, so warm/cold "
                    "does not apply and is not verified; network_recv_mib_per_repeat counts this host's "
                    "received bytes (all interfaces)")
        return ("a user's Dataset: dataperf does not know which files it reads, so the page cache is neither "
                "dropped nor pre-read and warm/cold is not verified")

    def disk_path(self) -> Path | None:
        """Where the disk collectors look: the data's folder, or nothing for remote data."""
        return None if self.remote else self.root

    def urls(self) -> list[str]:
        return [f.path for f in self.files]

    def summary(self, decode: bool | None = None) -> str:
        """One line on what is read and what is not, e.g. '120 images in 4 classes from train/; left out: val/
        (another split), 2 files that are not jpg/jpeg/png/webp images (Thumbs.db, README.txt)'; for another
        loader's folder, how its image and byte columns are handled (decode: --decode's value)."""
        n = f"{self.count:,} " if self.count is not None else ""
        what = "images" if self.kind == "image" else "samples"
        if self.kind == "tokens" and self.count is None:
            n, what = f"{len(self.files)} ", f"{self.format} token files"
        classes = f" in {len(self.classes)} class{'es' if len(self.classes) > 1 else ''}" if self.classes else ""
        where = self.location if self.remote else f"{Path(self.location).name}/"
        left = f"; left out: {', '.join(self.left_out)}" if self.left_out else ""
        reading = "".join(f"; {r}" for r in self.column_handling(decode))
        return f"{n}{what}{classes} from {where}{reading}{left}"

    def column_handling(self, decode: bool | None) -> list[str]:
        """What becomes of another loader's image and byte columns: images (its reader decodes them) are made
        tensors at --image-size as bench's are, byte columns decoded where they hold an image under --decode;
        said with the count, so a rate of undecoded bytes is never read as images'."""
        n = f"{self.count:,} " if self.count is not None else ""
        out = []
        if images := [c for c, e in self.columns.items() if e in IMAGE_ENCODINGS]:
            out.append(f"{', '.join(images)}: {n}images its reader decodes, made tensors at --image-size as "
                       "bench makes images")
        if raw := [c for c, e in self.columns.items() if e == "bytes"]:
            how = "decoded where they hold a JPEG/PNG/WebP image (--decode)" if decode else \
                "timed undecoded (--decode decodes those that hold images)"
            out.append(f"{', '.join(raw)}: {n}byte strings, {how}")
        return out

    def describe(self) -> str:
        n = f"{self.count} samples, " if self.count is not None else ""
        tb = self.total_bytes
        size = f", {tb / 2**20:.1f} MiB" if tb is not None else ""
        where = "remote " if self.remote else ""
        return f"{where}{self.kind} {self.format}: {n}{len(self.files)} files{size}"
