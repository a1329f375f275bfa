"""Local DATA: a dataperf dataset, a folder of images (flat or ImageFolder), WebDataset shards (folder, glob,
brace pattern), or token files (.bin memmap, .npy, .jsonl, .parquet). Names and sizes are read here, and the
samples in each tar shard are counted from its headers; what a scan learns is cached (data/facts.py),
never written into the data. A folder that holds a training split and others (train/ and val/, train.bin and
val.bin) is read as its training split, and what was left out is said (Data.left_out): a split is never mixed
in silently."""

from __future__ import annotations

import errno
import glob
import os
import re
from pathlib import Path

from dataperf.data import facts
from dataperf.data.foreign import loader_dataset
from dataperf.data.manifest import MANIFEST, Manifest, read_manifest
from dataperf.data.spec import IMAGE_EXTS, TOKEN_FORMATS, Data, DataFile
from dataperf.errors import UserError

PATTERN_CHARS = ("*", "?", "[", "{")
Stat = tuple[Path, int, int]  # a file, its size and its mtime_ns
TRAIN_SPLITS = ("train", "training")
OTHER_SPLITS = ("val", "valid", "validation", "test", "testing", "dev", "eval", "evaluation", "holdout")
SIDECARS = (MANIFEST, "index.json")  # files a data folder holds that are not samples, never "left out"


def resolve_local(spec: str, path: str, options: dict[str, str]) -> Data:
    if any(c in path for c in PATTERN_CHARS):
        files = expand_pattern(path)
        return _from_files(spec, _stat(files), options, root=_pattern_root(path), key=os.path.abspath(path))
    p = Path(path)
    if not p.exists():
        broken = _broken_link(p)
        if broken:
            raise UserError(f"dataset path {p} is {broken}; fix the link, or give the folder or file itself")
        raise UserError(f"dataset path does not exist: {p}; give a folder, a file, a glob or a brace pattern "
                        f"(or generate data with `dataperf shards make --out {p}`)")
    if p.is_file():
        return _from_files(spec, _stat([p]), options, root=p.parent, key=str(p.resolve()))
    if (p / MANIFEST).is_file():
        return from_manifest(spec, p, read_manifest(p))
    return _from_folder(spec, p, options)


def _broken_link(p: Path) -> str | None:
    """What is wrong with a path that exists as a link but leads to nothing: a loop, or a link to nothing (None:
    the path is no link, or not there at all)."""
    try:
        os.stat(p)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symlink loop (following its links comes back to where it started)"
        if p.is_symlink():
            return f"a symlink to {os.readlink(p)}, which does not exist"
    return None


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


def _scan(root: Path) -> tuple[list[Stat], list[Stat], dict[str, list[Stat]], list[Stat]]:
    """A folder's .tar shards, images, token files by format, and the other files (the cached scan when it is
    still good)."""
    tars: list[Stat] = []
    images: list[Stat] = []
    tokens: dict[str, list[Stat]] = {}
    other: list[Stat] = []
    for st in facts.walk(root):
        full = st[0]
        if full.name.endswith(".tar"):
            tars.append(st)
        elif _ext(full) in IMAGE_EXTS:
            images.append(st)
        elif full.suffix in TOKEN_FORMATS:
            tokens.setdefault(TOKEN_FORMATS[full.suffix], []).append(st)
        else:
            other.append(st)
    return tars, images, tokens, other


def split_of(name: str) -> str | None:
    """The split a file or folder name says it holds: 'train' for train/, train.bin, imagenet-train-000000.tar,
    train-00000-of-00002.parquet; 'other' for val/test/dev and the like; None when the name says nothing."""
    parts = set(re.split(r"[-_.]", name.lower()))
    if parts & set(TRAIN_SPLITS):
        return "train"
    return "other" if parts & set(OTHER_SPLITS) else None


def split_folders(root: Path) -> tuple[Path | None, list[Path]]:
    """root's training split folder and its other split folders, where it has both kinds."""
    try:
        subs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return None, []
    train = [p for p in subs if p.name.lower() in TRAIN_SPLITS]
    other = [p for p in subs if p.name.lower() in OTHER_SPLITS]
    return (train[0], other) if len(train) == 1 and other else (None, [])


def _training_files(files: list[Stat]) -> tuple[list[Stat], list[str]]:
    """Where the file names say train and another split, only the training files; and the names left out."""
    splits = [split_of(f[0].name) for f in files]
    if "train" not in splits or "other" not in splits:
        return files, []
    return ([f for f, s in zip(files, splits, strict=True) if s == "train"],
            [f[0].name for f, s in zip(files, splits, strict=True) if s != "train"])


def _from_folder(spec: str, root: Path, options: dict[str, str]) -> Data:
    """Scan once (or reuse the cached scan): shards win over images, images over token files (a folder holds
    one kind of data). A folder of split folders (train/ and val/) is read as train/; files whose names say
    train and another split (nanoGPT's train.bin and val.bin) as the training ones; both are said."""
    foreign = loader_dataset(spec, root)
    if foreign is not None:
        return foreign
    train, others = split_folders(root)
    if train is not None:
        d = resolve_local(spec, str(train), options)
        d.left_out = [f"{p.name}/ (another split)" for p in others] + d.left_out
        d.notes.append(f"read {train.name}/ only; left out {', '.join(p.name + '/' for p in others)}: other splits "
                       "(point DATA at one to measure it)")
        return d
    tars, images, tokens, other = _scan(root)
    if tars:
        kept, dropped = _training_files(tars)
        return _with_left_out(_shards(spec, kept, root, key=str(root.resolve())), dropped)
    if images:
        d = _images(spec, images, root)
        names = [f[0].name for f in other if f[0].name not in SIDECARS]
        if names:
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            d.left_out.append(f"{len(names)} files that are not {'/'.join(IMAGE_EXTS)} images ({shown})")
        return d
    if tokens:
        if len(tokens) > 1:
            raise UserError(f"{root} mixes token formats {sorted(tokens)}; point DATA at one of them with a glob")
        (fmt, files), = tokens.items()
        kept, dropped = _training_files(files)
        return _with_left_out(_tokens(spec, fmt, kept, root, options), dropped)
    raise UserError(f"{root} holds no data dataperf can read: no manifest.json, no .tar shards, no "
                    f"{'/'.join(IMAGE_EXTS)} images, no .bin/.npy/.jsonl/.parquet token files")


def _with_left_out(d: Data, dropped: list[str]) -> Data:
    if dropped:
        d.left_out.append(f"{', '.join(dropped)} (another split)")
        d.notes.append(f"read the training split only; left out {', '.join(dropped)}: another split (point DATA "
                       "at it with a glob to measure it)")
    return d


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
    """Token files; Parquet with an image column (Hugging Face's Image feature) is image data instead."""
    from dataperf.data import hfparquet, tokens

    if fmt == "parquet" and (columns := hfparquet.image_columns(files[0][0], options)) is not None:
        return hfparquet.resolve(spec, files, root, columns, options)

    d = Data(spec=spec, location=str(root), kind="tokens", format=fmt,
             files=[DataFile(str(f), size) for f, size, _ in files], options=options)
    tokens.check(d)
    return d
