"""Reading tar shards sample by sample, with corrupt shards turned into errors that name the file."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from dataperf.errors import UserError


def split_key(name: str) -> tuple[str, str]:
    """WebDataset's grouping rule: the key is the path up to the first dot of the file name."""
    d, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    key = f"{d}/{stem}" if d else stem
    return key, ext if dot else ""


PAYLOADS = ("jpg", "jpeg", "png", "webp", "npy")  # the members a sample's payload can be


def no_payload(members: list[str]) -> str:
    """Why a WebDataset sample (its member extensions) has no payload. Where an extension is itself
    'something.jpg', the file names hold a dot before their extension: say so, and the fix."""
    dotted = [m for m in members if "." in m and m.rpartition(".")[2].lower() in PAYLOADS]
    if dotted:
        return (f"its file names hold a dot before the extension, so WebDataset, which takes a sample's key up to "
                f"the first dot of a file name, read the extension as {dotted[0]!r}; rename the tar members so "
                f"that the only dot starts the extension (e.g. n01440764_0_0002.jpg), then re-pack the shards")
    return f"it has none of {PAYLOADS}; members: {sorted(members)}"


def corrupt(path: Path | str, e: BaseException) -> UserError:
    """A shard that cannot be read: its samples cannot even be counted, so --on-corrupt skip (which drops
    samples that do not decode) cannot apply; the other shards can still be measured without it."""
    return UserError(f"corrupt or unreadable tar shard {path}: {e}; regenerate or re-convert it, or measure the "
                     "other shards with a glob or brace pattern that leaves it out (--on-corrupt skip drops "
                     "samples that do not decode, not a shard that cannot be read)")


def members(path: Path | str, mode: str, fileobj: IO[bytes] | None = None) \
        -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo, str, str]]:
    """Each regular member of a shard with its WebDataset key and extension; a corrupt or unreadable shard is
    one UserError naming the file. mode "r|*" streams; "r:" seeks over member data (headers only). fileobj: an
    open stream of the shard (a remote one), named by path."""
    try:
        with tarfile.open(None if fileobj else path, mode=mode, fileobj=fileobj) as tf:
            for member in tf:
                if member.isfile():
                    yield (tf, member, *split_key(member.name))
    except (tarfile.TarError, EOFError, OSError) as e:
        raise corrupt(path, e) from None


def iter_tar_samples(path: Path | str, fileobj: IO[bytes] | None = None) -> Iterator[dict[str, bytes]]:
    """Yield {"__key__": key, ext: bytes, ...} per sample, streaming; raise UserError on a corrupt tar."""
    current: dict[str, bytes] = {}
    for tf, member, key, ext in members(path, "r|*", fileobj):
        try:
            f = tf.extractfile(member)
            data = f.read() if f else b""
            if len(data) != member.size:
                raise tarfile.ReadError(f"member {member.name} is truncated")
        except (tarfile.TarError, EOFError, OSError) as e:
            raise corrupt(path, e) from None
        if current and current["__key__"] != key.encode():
            yield current
            current = {}
        current["__key__"] = key.encode()
        current[ext] = data
    if current:
        yield current


def count_samples(path: Path) -> int:
    """WebDataset samples in a shard: runs of regular members sharing a key (members without an extension are
    skipped, as webdataset does). Reads headers only."""
    n, last = 0, None
    for _, _, key, ext in members(path, "r:"):
        if ext and key != last:
            n, last = n + 1, key
    return n
