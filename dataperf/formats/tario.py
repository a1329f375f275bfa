"""Reading tar shards sample by sample, with corrupt shards turned into errors that name the file."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

from dataperf.errors import UserError


def split_key(name: str) -> tuple[str, str]:
    """WebDataset's grouping rule: the key is the path up to the first dot of the file name."""
    d, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    key = f"{d}/{stem}" if d else stem
    return key, ext if dot else ""


def iter_tar_samples(path: Path) -> Iterator[dict[str, bytes]]:
    """Yield {"__key__": key, ext: bytes, ...} per sample, streaming; raise UserError on a corrupt tar."""
    current: dict[str, bytes] = {}
    try:
        with tarfile.open(path, mode="r|*") as tf:
            for member in tf:
                if not member.isfile():
                    continue
                key, ext = split_key(member.name)
                f = tf.extractfile(member)
                data = f.read() if f else b""
                if len(data) != member.size:
                    raise tarfile.ReadError(f"member {member.name} is truncated")
                if current and current["__key__"] != key.encode():
                    yield current
                    current = {}
                current["__key__"] = key.encode()
                current[ext] = data
    except (tarfile.TarError, EOFError, OSError) as e:
        raise UserError(f"corrupt or unreadable tar shard {path}: {e}; regenerate or re-convert it") from None
    if current:
        yield current
