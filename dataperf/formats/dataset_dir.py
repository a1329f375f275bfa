"""A dataset folder: its manifest, its files, and safe (temp-then-rename) creation."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataperf.errors import UserError

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


@dataclass
class Manifest:
    """What a dataset folder holds; written last, so a folder without one is not a finished dataset."""

    kind: str  # image | tokens | unknown (converted)
    format: str  # files | webdataset
    count: int
    total_bytes: int
    seed: int | None
    generator: dict[str, Any] = field(default_factory=dict)
    shards: list[str] = field(default_factory=list)  # webdataset: tar names
    files: list[str] = field(default_factory=list)  # files: one sample per file
    labels: list[int] = field(default_factory=list)  # files: label of each file
    sample_bytes: list[int] = field(default_factory=list)
    token_lengths: list[int] = field(default_factory=list)
    manifest_version: int = MANIFEST_VERSION

    def paths(self, root: Path) -> list[Path]:
        """Every data file of the dataset (what cache eviction and raw-read benchmarks touch)."""
        names = self.shards if self.format == "webdataset" else self.files
        return [root / n for n in names]


def write_manifest(root: Path, m: Manifest) -> None:
    (root / MANIFEST).write_text(json.dumps(asdict(m), indent=1), encoding="utf-8")


def read_manifest(root: str | os.PathLike) -> Manifest:
    """Load a dataset's manifest, or say clearly why the path is not a dataperf dataset."""
    r = Path(root)
    if not r.exists():
        raise UserError(f"dataset path does not exist: {r}; generate one with `dataperf shards make --out {r}`")
    if not r.is_dir():
        raise UserError(f"dataset path is not a folder: {r}")
    mp = r / MANIFEST
    if not mp.is_file():
        raise UserError(
            f"{r} has no {MANIFEST}; it is not a finished dataperf dataset "
            "(make one with `dataperf shards make`, or pack files with `dataperf shards convert`)"
        )
    try:
        d = json.loads(mp.read_text(encoding="utf-8"))
        return Manifest(**d)
    except (json.JSONDecodeError, TypeError) as e:
        raise UserError(f"{mp} is damaged ({e}); regenerate the dataset") from None
    except PermissionError:
        raise UserError(f"cannot read {mp}: permission denied") from None


def check_output_dir(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"output path exists and is not a folder: {out}")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise UserError(f"output folder is not empty: {out}; pass --overwrite to replace it, or choose another --out")
    parent = out.resolve().parent
    if not os.access(parent if parent.exists() else parent.parent, os.W_OK):
        raise UserError(f"cannot write under {parent}: permission denied")


@contextlib.contextmanager
def staged_output(out: Path, overwrite: bool) -> Iterator[Path]:
    """Write into a hidden sibling folder and rename it into place only when complete.

    A crash or error leaves no half-written folder that looks like a finished dataset.
    """
    check_output_dir(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)
