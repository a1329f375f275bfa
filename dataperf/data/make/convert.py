"""Pack a folder of per-sample files into WebDataset tar shards (files grouped by basename into samples). The
folder is read as bench reads it: its training split only, image extensions in any case (ImageNet's `.JPEG`),
and an ImageFolder's class folders as each sample's `.cls` label."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from dataperf.data.local import split_folders
from dataperf.data.manifest import MANIFEST, Manifest, staged_output, write_manifest
from dataperf.data.spec import IMAGE_EXTS
from dataperf.data.tario import split_key
from dataperf.errors import UserError

Group = tuple[str, list[tuple[str, Path | bytes]]]  # a sample's key and its members: (extension, file or bytes)


def group_files(src: Path) -> list[Group]:
    """Group every file under src by WebDataset key: a/b/000.jpg and a/b/000.cls make one sample. A symlink that
    leads out of src is refused: packing its target would copy a file the user never put in the dataset (a link
    to /etc/passwd became an image sample)."""
    groups: dict[str, list[tuple[str, Path | bytes]]] = {}
    root = src.resolve()
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in filenames:
            if fn.startswith(".") or fn == MANIFEST:
                continue
            p = Path(dirpath) / fn
            if p.is_symlink() and not p.resolve().is_relative_to(root):
                raise UserError(f"{p} is a symlink to {os.readlink(p)}, outside the source folder {src}; shards "
                                "convert packs only what is inside it: copy that file in, or remove the link")
            key, ext = split_key(p.relative_to(src).as_posix())
            # readers look members up by lower-case extension (bench's check too): x.JPEG is packed as x.jpeg
            groups.setdefault(key, []).append((ext.lower() or "bin", p))
    return sorted(groups.items())


def with_class_labels(groups: list[Group]) -> list[str]:
    """An ImageFolder's labels as torchvision's ImageFolder gives them (the sorted class folders' index), added
    to each sample as `.cls` so the shards train like the folder; the class names, or [] when the samples do not
    all sit in a class folder or already carry a label."""
    keys = [key for key, _ in groups]
    if not keys or any("/" not in k for k in keys) or any(e == "cls" for _, m in groups for e, _ in m):
        return []
    classes = sorted({k.partition("/")[0] for k in keys})
    index = {c: i for i, c in enumerate(classes)}
    for key, members in groups:
        members.append(("cls", str(index[key.partition("/")[0]]).encode()))
    return classes


def sample_groups(groups: list[Group]) -> tuple[list[Group], list[str]]:
    """In a folder of images, the groups that hold an image; the others (Thumbs.db, README.txt: a tar sample
    without an image that every reader then refuses) are left out, and their files named."""
    if not any(e in IMAGE_EXTS for _, members in groups for e, _ in members):
        return groups, []
    kept: list[Group] = []
    dropped: list[Group] = []
    for g in groups:
        (kept if any(e in IMAGE_EXTS for e, _ in g[1]) else dropped).append(g)
    return kept, [p.name for _, members in dropped for _, p in members if isinstance(p, Path)]


def convert(
    src: Path, out: Path, shard_mb: float = 64.0, overwrite: bool = False,
    progress: Callable[[int], None] | None = None, shards: int | None = None,
) -> Manifest:
    """Pack src into shards under out; the manifest's generator says what was left out and the classes."""
    if not src.exists():
        raise UserError(f"source folder does not exist: {src}")
    if not src.is_dir():
        raise UserError(f"source is not a folder: {src}")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise UserError("--out must not be inside the source folder")
    train, others = split_folders(src)
    splits = [f"{p.name}/ (another split)" for p in others]
    if train is not None:
        src = train
    groups, left_out = sample_groups(group_files(src))
    if not groups:
        raise UserError(f"no files found under {src}; nothing to convert")
    import webdataset as wds

    from dataperf.data.make.generate import samples_per_shard

    maxcount = samples_per_shard(len(groups), shards)
    maxsize = int(shard_mb * 1e6) if shards is None else 10**15
    kind = "unknown"
    exts = {e for _, members in groups for e, _ in members}
    if left_out or exts & set(IMAGE_EXTS):
        kind = "image"
    elif "npy" in exts:
        kind = "tokens"
    classes = with_class_labels(groups) if kind == "image" else []
    with staged_output(out, overwrite) as tmp:
        m = Manifest(kind=kind, format="webdataset", count=0, total_bytes=0, seed=None,
                     generator={"converted_from": str(src), "shard_mb": shard_mb, "left_out": left_out,
                                "splits_left_out": splits, "class_names": classes})
        with wds.ShardWriter(str(tmp / "shard-%06d.tar"), maxsize=maxsize, maxcount=maxcount,
                             verbose=0, mtime=0.0) as sink:
            for key, members in groups:
                sample: dict[str, object] = {"__key__": key}
                size = 0
                for ext, p in members:
                    try:
                        data = p if isinstance(p, bytes) else p.read_bytes()
                    except PermissionError:
                        raise UserError(f"cannot read {p}: permission denied") from None
                    sample[ext] = data
                    size += len(data)
                sink.write(sample)
                m.count += 1
                m.total_bytes += size
                m.sample_bytes.append(size)
                if progress:
                    progress(1)
        m.shards = sorted(p.name for p in tmp.glob("shard-*.tar"))
        write_manifest(tmp, m)
    return m
