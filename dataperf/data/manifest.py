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
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{mp} is damaged ({e}); regenerate the dataset") from None
    except PermissionError:
        raise UserError(f"cannot read {mp}: permission denied") from None
    m = manifest_from_dict(d, mp)
    key = {"webdataset": "shards", "files": "files"}.get(m.format)
    if key is None or (m.count and not getattr(m, key)):
        what = f"format {m.format!r}" + ("" if key is None else f" but its {key!r} list is empty")
        raise UserError(f"{mp} says {what}, and {r} holds {_holds(r)}; a dataperf dataset is 'webdataset' (.tar "
                        "shards named in 'shards') or 'files' (named in 'files'): fix the manifest, or regenerate "
                        "the dataset")
    for name in getattr(m, key):
        if _outside(name):
            raise UserError(f"{mp} lists {name!r}, which is outside the dataset folder {r}; a dataperf dataset "
                            "names its files relative to its folder and inside it: fix the manifest, or "
                            "regenerate the dataset")
    return m


def _outside(name: str) -> bool:
    """Does a manifest entry leave its dataset folder (an absolute path, or `..` above the folder)? A manifest is
    data, and it must not make dataperf open /etc/passwd or a neighbour's files."""
    n = os.path.normpath(name)
    return os.path.isabs(n) or n == ".." or n.startswith("../")


def _holds(root: Path) -> str:
    """What a folder holds, by file type, for a manifest that does not match it: '5 .tar files'."""
    from collections import Counter

    kinds = Counter(p.suffix or p.name for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
    return ", ".join(f"{n} {ext} files" for ext, n in kinds.most_common(3)) or "no other files"


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,), "format": (str,), "count": (int,), "total_bytes": (int,), "seed": (int, type(None)),
    "generator": (dict,), "shards": (list,), "files": (list,), "labels": (list,), "sample_bytes": (list,),
    "token_lengths": (list,), "manifest_version": (int,),
}
_LIST_ITEMS: dict[str, type] = {"shards": str, "files": str, "labels": int, "sample_bytes": int,
                                "token_lengths": int}


def manifest_from_dict(d: Any, mp: Path) -> Manifest:
    """Check a manifest's version and field types; keys a newer dataperf added are ignored, not fatal."""
    if not isinstance(d, dict):
        raise UserError(f"{mp} is damaged (not a JSON object); regenerate the dataset")
    version = d.get("manifest_version", MANIFEST_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version > MANIFEST_VERSION:
        raise UserError(f"{mp} has manifest_version {version!r}; this dataperf reads version {MANIFEST_VERSION} "
                        "or older: upgrade dataperf, or regenerate the dataset with this version")
    missing = [k for k in ("kind", "format", "count", "total_bytes", "seed") if k not in d]
    if missing:
        raise UserError(f"{mp} is damaged (missing {missing}); regenerate the dataset")
    kw = {}
    for k, types in _FIELD_TYPES.items():
        if k not in d:
            continue
        v = d[k]
        bad = not isinstance(v, types) or (isinstance(v, bool) and bool not in types)
        item = _LIST_ITEMS.get(k)
        if not bad and item is not None:
            bad = any(not isinstance(x, item) or (isinstance(x, bool) and item is int) for x in v)
        if bad:
            want = f"a list of {item.__name__}" if item else " or ".join(t.__name__ for t in types)
            raise UserError(f"{mp} is damaged: {k} must be {want}, got {v!r:.60}; regenerate the dataset")
        kw[k] = v
    return Manifest(**kw)


def check_output_dir(out: Path, overwrite: bool) -> None:
    if out.is_symlink() and not out.exists():
        raise UserError(f"output path {out} is a dangling symlink (to {os.readlink(out)}); remove it or "
                        "choose another --out")
    if out.exists() and not out.is_dir():
        raise UserError(f"output path exists and is not a folder: {out}")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise UserError(f"output folder is not empty: {out}; pass --overwrite to replace it, or choose another --out")
    parent = out.resolve().parent
    probe = parent  # missing folders are made (staged_output): what must be writable is the nearest that exists
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    made = f" (to make {parent.relative_to(probe)} in it)" if probe != parent else ""
    if not probe.is_dir():
        raise UserError(f"cannot write under {probe}{made}: it is a file, not a folder; choose another --out")
    if not os.access(probe, os.W_OK):
        why = "a read-only file system" if os.statvfs(probe).f_flag & os.ST_RDONLY else "permission denied"
        raise UserError(f"cannot write under {probe}{made}: {why}; choose another --out")


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


@contextlib.contextmanager
def staged_output(out: Path, overwrite: bool) -> Iterator[Path]:
    """Write into a hidden sibling folder and rename it into place only when complete.

    A crash or error leaves no half-written folder that looks like a finished dataset.
    """
    check_output_dir(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it 0700; a dataset is made to be read by training jobs
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
