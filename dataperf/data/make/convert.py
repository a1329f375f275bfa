"""Pack a folder of per-sample files into WebDataset tar shards (files grouped by basename into samples)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from dataperf.data.manifest import MANIFEST, Manifest, staged_output, write_manifest
from dataperf.data.tario import split_key
from dataperf.errors import UserError


def group_files(src: Path) -> list[tuple[str, list[tuple[str, Path]]]]:
    """Group every file under src by WebDataset key: a/b/000.jpg and a/b/000.cls make one sample. A symlink that
    leads out of src is refused: packing its target would copy a file the user never put in the dataset (a link
    to /etc/passwd became an image sample)."""
    groups: dict[str, list[tuple[str, Path]]] = {}
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
            if not ext:
                ext = "bin"
            groups.setdefault(key, []).append((ext, p))
    return sorted(groups.items())


def sample_groups(groups: list[tuple[str, list[tuple[str, Path]]]]
                  ) -> tuple[list[tuple[str, list[tuple[str, Path]]]], list[str]]:
    """In a folder of images, the groups that hold an image; the others (Thumbs.db, README.txt: a tar sample
    without an image that every reader then refuses) are left out, and their files named."""
    from dataperf.data.spec import IMAGE_EXTS

    if not any(e in IMAGE_EXTS for _, members in groups for e, _ in members):
        return groups, []
    kept: list[tuple[str, list[tuple[str, Path]]]] = []
    dropped: list[tuple[str, list[tuple[str, Path]]]] = []
    for g in groups:
        (kept if any(e in IMAGE_EXTS for e, _ in g[1]) else dropped).append(g)
    return kept, [p.name for _, members in dropped for _, p in members]


def convert(
    src: Path, out: Path, shard_mb: float = 64.0, overwrite: bool = False,
    progress: Callable[[int], None] | None = None, shards: int | None = None,
) -> Manifest:
    if not src.exists():
        raise UserError(f"source folder does not exist: {src}")
    if not src.is_dir():
        raise UserError(f"source is not a folder: {src}")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise UserError("--out must not be inside the source folder")
    groups, left_out = sample_groups(group_files(src))
    if not groups:
        raise UserError(f"no files found under {src}; nothing to convert")
    import webdataset as wds

    from dataperf.data.make.generate import samples_per_shard

    maxcount = samples_per_shard(len(groups), shards)
    maxsize = int(shard_mb * 1e6) if shards is None else 10**15
    kind = "unknown"
    exts = {e for _, members in groups for e, _ in members}
    if left_out or "jpg" in exts or "jpeg" in exts:
        kind = "image"
    elif "npy" in exts:
        kind = "tokens"
    with staged_output(out, overwrite) as tmp:
        m = Manifest(kind=kind, format="webdataset", count=0, total_bytes=0, seed=None,
                     generator={"converted_from": str(src), "shard_mb": shard_mb, "left_out": left_out})
        with wds.ShardWriter(str(tmp / "shard-%06d.tar"), maxsize=maxsize, maxcount=maxcount,
                             verbose=0, mtime=0.0) as sink:
            for key, members in groups:
                sample: dict[str, object] = {"__key__": key}
                size = 0
                for ext, p in members:
                    try:
                        data = p.read_bytes()
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
