"""Local DATA: a dataperf dataset, a folder of images (flat or ImageFolder), WebDataset shards (folder, glob,
brace pattern), or token files (.bin memmap, .npy, .jsonl, .parquet). Names and sizes are read here, and the
samples in each tar shard are counted from its headers; what a scan learns is cached (data/facts.py),
never written into the data."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from dataperf.data import facts
from dataperf.data.manifest import MANIFEST, Manifest, read_manifest
from dataperf.data.spec import IMAGE_EXTS, TOKEN_FORMATS, Data, DataFile
from dataperf.errors import UserError

PATTERN_CHARS = ("*", "?", "[", "{")
Stat = tuple[Path, int, int]  # a file, its size and its mtime_ns


def resolve_local(spec: str, path: str, options: dict[str, str]) -> Data:
    if any(c in path for c in PATTERN_CHARS):
        files = expand_pattern(path)
        return _from_files(spec, _stat(files), options, root=_pattern_root(path), key=os.path.abspath(path))
    p = Path(path)
    if not p.exists():
        raise UserError(f"dataset path does not exist: {p}; give a folder, a file, a glob or a brace pattern "
                        f"(or generate data with `dataperf shards make --out {p}`)")
    if p.is_file():
        return _from_files(spec, _stat([p]), options, root=p.parent, key=str(p.resolve()))
    if (p / MANIFEST).is_file():
        return from_manifest(spec, p, read_manifest(p))
    return _from_folder(spec, p, options)


def _stat(paths: list[Path]) -> list[Stat]:
    return [(p, s.st_size, s.st_mtime_ns) for p, s in zip(paths, facts.stat_all(paths), strict=True)]


def expand_pattern(pattern: str) -> list[Path]:
    """Brace pattern (`train-{0000..0146}.tar`) then glob; every brace-expanded name must exist."""
    import braceexpand

    out: list[Path] = []
    for name in braceexpand.braceexpand(pattern):
        if any(c in name for c in "*?["):
            out += [Path(x) for x in sorted(glob.glob(name))]
        else:
            out.append(Path(name))
    missing = [str(x) for x in out if not x.is_file()]
    if missing:
        raise UserError(f"{len(missing)} of {len(out)} files of {pattern!r} do not exist (first: {missing[0]})")
    if not out:
        raise UserError(f"no file matches {pattern!r}")
    return out


def _pattern_root(pattern: str) -> Path:
    head = pattern
    for c in ("*", "?", "[", "{"):
        head = head.split(c)[0]
    return Path(head).parent if not head.endswith(os.sep) else Path(head)


def from_manifest(spec: str, root: Path, m: Manifest) -> Data:
    names = m.shards if m.format == "webdataset" else m.files
    sizes: list[int | None] = list(m.sample_bytes) if m.format == "files" and len(m.sample_bytes) == len(names) \
        else [None] * len(names)
    files = [DataFile(str(root / n), s if s is not None else _size(root / n))
             for n, s in zip(names, sizes, strict=True)]
    return Data(spec=spec, location=str(root), kind=m.kind, format=m.format, files=files, count=m.count,
                labels=list(m.labels), manifest=m)


def _size(p: Path) -> int | None:
    try:
        return p.stat().st_size
    except OSError:
        return None


def _ext(p: Path) -> str:
    return p.name.rpartition(".")[2].lower()


def _scan(root: Path) -> tuple[list[Stat], list[Stat], dict[str, list[Stat]]]:
    """A folder's .tar shards, images and token files by format (the cached scan when it is still good)."""
    tars: list[Stat] = []
    images: list[Stat] = []
    tokens: dict[str, list[Stat]] = {}
    for st in facts.walk(root):
        full = st[0]
        if full.name.endswith(".tar"):
            tars.append(st)
        elif _ext(full) in IMAGE_EXTS:
            images.append(st)
        elif full.suffix in TOKEN_FORMATS:
            tokens.setdefault(TOKEN_FORMATS[full.suffix], []).append(st)
    return tars, images, tokens


def image_manifest(root: Path) -> Manifest | None:
    """The in-memory manifest of a folder of images (flat or ImageFolder) as bench reads it, so `shards inspect`
    checks the same files; None when it holds shards (which win) or no images."""
    tars, images, _ = _scan(root)
    return _images(str(root), images, root).manifest if images and not tars else None


def _from_folder(spec: str, root: Path, options: dict[str, str]) -> Data:
    """Scan once (or reuse the cached scan): shards win over images, images over token files (a folder holds
    one kind of data)."""
    tars, images, tokens = _scan(root)
    if tars:
        return _shards(spec, tars, root, key=str(root.resolve()))
    if images:
        return _images(spec, images, root)
    if tokens:
        if len(tokens) > 1:
            raise UserError(f"{root} mixes token formats {sorted(tokens)}; point DATA at one of them with a glob")
        (fmt, files), = tokens.items()
        return _tokens(spec, fmt, files, root, options)
    raise UserError(f"{root} holds no data dataperf can read: no manifest.json, no .tar shards, no "
                    f"{'/'.join(IMAGE_EXTS)} images, no .bin/.npy/.jsonl/.parquet token files")


def _from_files(spec: str, files: list[Stat], options: dict[str, str], root: Path, key: str) -> Data:
    exts = {f[0].suffix for f in files}
    if exts == {".tar"}:
        return _shards(spec, files, root, key)
    if all(_ext(f[0]) in IMAGE_EXTS for f in files):
        return _images(spec, files, root)
    if len(exts) == 1 and next(iter(exts)) in TOKEN_FORMATS:
        return _tokens(spec, TOKEN_FORMATS[next(iter(exts))], files, root, options)
    raise UserError(f"cannot tell what {spec!r} holds (file types {sorted(exts)}); give .tar shards, "
                    f"{'/'.join(IMAGE_EXTS)} images, or one of .bin/.npy/.jsonl/.parquet")


def _shards(spec: str, tars: list[Stat], root: Path, key: str) -> Data:
    """WebDataset shards, no manifest needed; the in-memory Manifest lets DALI read them like ours. Samples
    are counted from the tar headers (cached per shard), so cold-cache checks know an epoch's share."""
    counts = facts.tar_samples(key, tars)
    files = [DataFile(str(t), size) for t, size, _ in tars]
    m = Manifest(kind="unknown", format="webdataset", count=sum(counts), total_bytes=sum(s for _, s, _ in tars),
                 seed=None, shards=[os.path.relpath(t, root) for t, _, _ in tars])
    return Data(spec=spec, location=str(root), kind="image", format="webdataset", files=files, count=m.count,
                manifest=m)


def _images(spec: str, stats: list[Stat], root: Path) -> Data:
    """ImageFolder when every image sits in a first-level class folder (label = sorted class index)."""
    images = [s[0] for s in stats]
    rel = [img.relative_to(root) if img.is_relative_to(root) else Path(img.name) for img in images]
    classes: list[str] = []
    labels: list[int] = []
    if all(len(r.parts) >= 2 for r in rel):
        classes = sorted({r.parts[0] for r in rel})
        index = {c: i for i, c in enumerate(classes)}
        labels = [index[r.parts[0]] for r in rel]
    files = [DataFile(str(img), size) for img, size, _ in stats]
    m = Manifest(kind="image", format="files", count=len(files), total_bytes=sum(f.size_bytes or 0 for f in files),
                 seed=None, files=[str(r) for r in rel], labels=labels)
    return Data(spec=spec, location=str(root), kind="image", format="files", files=files, count=len(files),
                labels=labels, classes=classes, manifest=m)


def _tokens(spec: str, fmt: str, files: list[Stat], root: Path, options: dict[str, str]) -> Data:
    from dataperf.data import tokens

    d = Data(spec=spec, location=str(root), kind="tokens", format=fmt,
             files=[DataFile(str(f), size) for f, size, _ in files], options=options)
    tokens.check(d)
    return d
