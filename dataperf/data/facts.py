"""What scanning local DATA learns, cached so the next command does not learn it again: the listing of a
folder (its sub-folders' mtimes, every file's size and mtime) and the sample count of each tar shard.

Walking a large image tree, and above all reading every tar header to count samples, is slow on the storage
dataperf is meant to measure. The facts live under `$DATAPERF_CACHE_DIR/facts/` (default
`~/.cache/dataperf/facts/`), one JSON file per folder or pattern, never in the user's data. They are checked on
every use: a folder's listing is reused only while every folder it walked has the mtime it had; a file's
facts only while its size and mtime are unchanged (each file is stat'ed every time: a touched or rewritten
file is learnt again, and only it). Facts about anything modified within RACY_S of the scan are not kept (a
change inside the same timestamp tick would not show in the mtime). A cache that cannot be read (corrupt,
another version, unreadable) is ignored, and one that cannot be written (read-only, full) is skipped: the
command scans and goes on, never fails because of the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dataperf.data.tario import count_samples as count_tar_samples
from dataperf.errors import UserError

VERSION = 1
RACY_S = 2.0
STAT_THREADS = 16  # stat calls overlap on network file systems; local ones lose nothing
PARALLEL_FROM = 256  # files; below this threads cost more than they hide


def cache_home() -> Path:
    """dataperf's own cache folder: $DATAPERF_CACHE_DIR, else ~/.cache/dataperf."""
    return Path(os.environ.get("DATAPERF_CACHE_DIR") or Path.home() / ".cache" / "dataperf")


def entry_path(key: str) -> Path:
    return cache_home() / "facts" / f"{hashlib.sha1(key.encode()).hexdigest()[:20]}.json"


def load(key: str) -> dict[str, Any]:
    """The cached entry for `key`, or an empty one if there is none usable (never raises)."""
    empty: dict[str, Any] = {"dirs": {}, "files": {}}
    try:
        d = json.loads(entry_path(key).read_text(encoding="utf-8"))
        if d.get("version") != VERSION or d.get("key") != key:
            return empty
        if not isinstance(d.get("dirs"), dict) or not isinstance(d.get("files"), dict):
            return empty
        return {"dirs": d["dirs"], "files": d["files"]}
    except (OSError, ValueError, AttributeError):
        return empty


def save(key: str, dirs: dict[str, int], files: dict[str, list]) -> None:
    """Write the entry atomically (temp file, then rename); any failure leaves the command unaffected."""
    path = entry_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".facts-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"version": VERSION, "key": key, "dirs": dirs, "files": files}, f)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        pass


def stat_all(paths: list[Path]) -> list[os.stat_result]:
    if len(paths) < PARALLEL_FROM:
        return [p.stat() for p in paths]
    with ThreadPoolExecutor(STAT_THREADS) as ex:
        return list(ex.map(os.stat, paths))


def _settled(mtime_ns: int, started_ns: int) -> bool:
    """Old enough that a later change in the same timestamp tick cannot hide behind an equal mtime."""
    return mtime_ns < started_ns - RACY_S * 1e9


def walk(root: Path) -> list[tuple[Path, int, int]]:
    """Every non-hidden file under root, recursively and sorted as os.walk with sorted names gives them, as
    (path, size, mtime_ns). The listing is reused while every folder walked keeps its mtime."""
    key = f"walk|{root.resolve()}"
    started = time.time_ns()
    entry = load(key)
    cached = entry["files"] if entry["dirs"] and _dirs_unchanged(entry["dirs"]) else None
    dirs, names = (entry["dirs"], list(cached)) if cached is not None else _list(root)
    paths = [Path(n) for n in names]
    try:
        stats = stat_all(paths)
    except FileNotFoundError:
        if cached is None:
            raise UserError(f"files under {root} vanished while dataperf listed them; is something deleting "
                            "them? run again once the data is settled") from None
        save(key, {}, {})  # a listing that names a missing file is stale: walk afresh
        return walk(root)
    files = {n: [s.st_size, s.st_mtime_ns] for n, s in zip(names, stats, strict=True)}
    if files != cached and all(_settled(m, started) for m in dirs.values()):
        save(key, dirs, files)
    return [(p, s.st_size, s.st_mtime_ns) for p, s in zip(paths, stats, strict=True)]


def _dirs_unchanged(dirs: dict[str, int]) -> bool:
    try:
        return all(os.stat(d).st_mtime_ns == m for d, m in dirs.items())
    except OSError:
        return False


def _list(root: Path) -> tuple[dict[str, int], list[str]]:
    """Walk root: each folder's mtime and its non-hidden files, sorted (a change made while this runs is
    newer than the scan's start, so the listing is not kept: see _settled)."""
    dirs: dict[str, int] = {}
    names: list[str] = []
    for d, sub, files in os.walk(root):
        dirs[d] = os.stat(d).st_mtime_ns
        sub[:] = sorted(x for x in sub if not x.startswith("."))
        names += [os.path.join(d, n) for n in sorted(files) if not n.startswith(".")]
    return dirs, names


def tar_samples(key: str, tars: list[tuple[Path, int, int]], count: Callable[[Path], int] | None = None) -> list[int]:
    """Samples in each shard (given with its size and mtime), counted once per (path, size, mtime)."""
    count = count or count_tar_samples
    entry = load(f"tars|{key}")
    started = time.time_ns()
    known: dict[str, list] = entry["files"]
    todo = [p for p, size, mtime in tars if _known(known.get(str(p)), size, mtime) is None]
    with ThreadPoolExecutor(min(STAT_THREADS, max(len(todo), 1))) as ex:
        fresh = dict(zip(todo, ex.map(count, todo), strict=True))
    out, keep = [], {}
    for p, size, mtime in tars:
        n = fresh[p] if p in fresh else _known(known[str(p)], size, mtime)
        out.append(n)
        if _settled(mtime, started):
            keep[str(p)] = [size, mtime, n]
    if fresh or len(keep) != len(known):
        save(f"tars|{key}", {}, keep)
    return out  # type: ignore[return-value]


def _known(fact: Any, size: int, mtime: int) -> int | None:
    if isinstance(fact, list) and len(fact) == 3 and fact[:2] == [size, mtime] and isinstance(fact[2], int):
        return fact[2]
    return None


