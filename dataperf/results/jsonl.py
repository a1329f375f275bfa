"""Records on disk: appended one whole line at a time and fsynced, so a crash mid-sweep keeps every finished trial;
a results file has one writer at a time (an flock on a sidecar), and a damaged line is named, never guessed at.
Old records are upgraded on read."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dataperf.errors import UserError
from dataperf.results.config import LoaderConfig
from dataperf.results.kinds import RECORD_TYPES, SCHEMA_VERSION, LoaderResult, Record


def _clean(v: Any) -> Any:
    if isinstance(v, float) and v != v:  # NaN is not JSON; None says "not measured"
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def to_json(rec: Record) -> str:
    return json.dumps(_clean(asdict(rec)), sort_keys=True)


def stamp(rec: Record) -> Record:
    """Fill the record's provenance (machine, versions, commit, command, filesystem under its data) if unset."""
    if not rec.env:
        from dataperf.results import provenance

        rec.env = provenance.collect(getattr(rec, "data", None))
    return rec



def lock_path(path: str | os.PathLike) -> Path:
    """The sidecar file whose flock marks a results file as in use; it holds the holder's pid.

    It sits beside the file the path names with every symlink followed, so a symlink to the results file (or to
    its folder) finds the same sidecar; a hard link is caught by the lock on the file itself (`exclusive`). The
    lock is on a sidecar, not only on the results file, so `--overwrite` can replace the results file while the
    lock stays where a second run looks for it. The sidecar is left in place: unlinking it would let a late
    opener lock an orphaned inode."""
    p = real_path(path)
    return p.with_name(f".{p.name}.lock")


def real_path(path: str | os.PathLike) -> Path:
    """The path with every symlink followed: the one name all aliases of a results file share."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError):  # RuntimeError: a symlink loop (Python 3.11)
        raise UserError(f"{path} is a symlink loop (or a link that cannot be followed); fix the link or choose "
                        "another --out") from None


@dataclasses.dataclass
class _Lock:
    """What this process holds for one results file: the sidecar's fd and, per identity (st_dev, st_ino) of the
    results file, an fd whose flock claims that file under any name."""

    sidecar: int
    files: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)


_held: dict[Path, _Lock] = {}  # results file (symlinks followed) -> what this process holds on it


def _forget_in_child() -> None:
    """A forked child (a DataLoader worker) closes its copies of the lock fds: a flock lives while any copy is
    open, so a worker that outlives a killed run would keep the results file locked (and `--resume` refused)."""
    for lock in _held.values():
        for fd in (lock.sidecar, *lock.files.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@contextlib.contextmanager
def exclusive(path: str | os.PathLike) -> Iterator[None]:
    """Hold the exclusive lock on a results file for as long as this run writes to it.

    A second writer (a second sweep, `--resume` or `--overwrite` alike, under any name of the same file: a
    symlink, a hard link, the folder spelled another way) gets a UserError naming the pid of the run that holds
    it, instead of interleaving or deleting that run's trials. The lock is free once this process is gone, whatever
    its forked workers do (`_forget_in_child`)."""
    key = real_path(path)
    if key in _held:
        yield
        return
    lp = lock_path(path)
    try:
        lp.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lp, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise UserError(f"cannot create the lock file {lp}: {e.strerror}; choose an --out in a folder "
                        "you can write") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise _busy(path, holder) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    lock = _held[key] = _Lock(fd)
    owner = os.getpid()
    try:
        try:
            f = os.open(key, os.O_RDONLY)
        except OSError:  # no file yet (or unreadable): append claims it when it opens it
            pass
        else:
            try:
                _claim(path, lock, f)
            finally:
                os.close(f)
        yield
    finally:
        if os.getpid() == owner:  # never in a forked child, whose copies _forget_in_child closed
            _held.pop(key, None)
            for f in lock.files.values():
                os.close(f)
            os.ftruncate(fd, 0)
            os.close(fd)  # closing releases the flock


def _claim(path: str | os.PathLike, lock: _Lock, fd: int) -> None:
    """Lock the results file open at fd itself (its inode: every hard link to it), unless this run already has."""
    st = os.fstat(fd)
    ident = (st.st_dev, st.st_ino)
    if ident in lock.files:
        return
    mine = os.dup(fd)  # the flock belongs to the open file, kept open by this copy after fd is closed
    try:
        fcntl.flock(mine, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(mine)
        raise _busy(path, _flock_holder(ident) or "unknown") from None
    lock.files[ident] = mine


def _busy(path: str | os.PathLike, holder: str) -> UserError:
    return UserError(f"{path} is being written by another dataperf run (pid {holder}); wait for it to finish, or "
                     "choose another --out")


def _flock_holder(ident: tuple[int, int]) -> str | None:
    """The pid holding a flock on the file (st_dev, st_ino), from /proc/locks (where the run writing it under
    another name, a hard link, wrote no sidecar this run can find)."""
    dev, ino = ident
    want = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == want:
            return parts[4]
    return None


def append(path: str | os.PathLike, rec: Record) -> None:
    """Append one record as one whole line, then fsync, so finished trials survive a crash of the rest.

    The file is opened O_APPEND and the line written in one write, so even a writer that bypassed the lock could
    not land on another's bytes. A partial last line (a crash or a full disk mid-write) is cut off first, never
    glued onto. If the write or fsync fails (ENOSPC, EIO) the file is cut back to where it was, so it stays valid
    JSONL holding every record written before, and the failure is a UserError naming the file."""
    p = Path(path)
    line = (to_json(stamp(rec)) + "\n").encode("utf-8")
    with exclusive(p):
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(p, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as e:
            raise UserError(f"cannot write results to {p}: {e.strerror}; choose another --out") from None
        try:
            _claim(p, _held[real_path(p)], fd)  # a file this run created (or --overwrite replaced)
            end = _cut_partial_tail(fd)
            try:
                n = os.write(fd, line)
                if n != len(line):
                    raise OSError(errno.ENOSPC, "short write (disk full?)")
                os.fsync(fd)
            except OSError as e:
                os.ftruncate(fd, end)
                raise UserError(f"cannot write results to {p}: {e.strerror or e}; the {_count_lines(fd)} "
                                "records written before are kept; free space (or fix the disk) and run the "
                                "same command with --resume") from None
        finally:
            os.close(fd)


def _cut_partial_tail(fd: int) -> int:
    """Truncate a last line that has no newline (a record cut short); return the size to write at."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    pos = size
    while pos > 0:
        step = min(65536, pos)
        chunk = os.pread(fd, step, pos - step)
        i = chunk.rfind(b"\n")
        if i >= 0:
            pos = pos - step + i + 1
            break
        pos -= step
    os.ftruncate(fd, pos)
    return pos


def _count_lines(fd: int) -> int:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0).count(b"\n") if size else 0


def from_dict(d: Any, where: str = "record") -> Record:
    if not isinstance(d, dict):
        raise UserError(f"{where}: a JSON {type(d).__name__}, not a record object; is this a dataperf "
                        "results file?")
    kind = d.get("kind")
    cls = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise UserError(f"{where}: unknown record kind {kind!r}; is this a dataperf results file?")
    d = upgrade(d)
    if d.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"{where}: record has schema_version {d.get('schema_version')}, this dataperf reads up to "
            f"{SCHEMA_VERSION}; upgrade dataperf to read it"
        )
    fields_ = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for k, v in d.items():
        if k not in fields_:
            continue  # a field a newer dataperf added: readable, ignored
        if not _type_ok(str(fields_[k].type), v):
            raise UserError(f"{where}: field {k!r} holds {v!r}, not a {fields_[k].type}; the file is damaged")
        kwargs[k] = float("nan") if v is None and _is_float_field(cls, k) else v
    cfg = kwargs.get("config")
    if isinstance(cfg, dict) and cfg:
        names = {f.name for f in dataclasses.fields(LoaderConfig)}
        bad = sorted(set(cfg) - names)
        if bad:
            raise UserError(f"{where}: unknown loader config keys {bad}; the file is damaged or from another "
                            "dataperf version")
    return cls(**kwargs)


def upgrade(d: dict[str, Any]) -> dict[str, Any]:
    """Bring an older record up to SCHEMA_VERSION instead of refusing it (as asv migrates its results).

    Before schema 3 every loader read in storage order: an old config gets `shuffle: False` and its
    config_key is recomputed, so an old sequential trial never matches a new shuffled one (resume, compare).
    Before schema 4 a config named its backend `format`: it is renamed `backend` in the config and in every
    config key the record holds (config_key, variant_of, best_config_key, each prediction's config), so an old
    record keys equal to the same config measured today (sweep --resume, compare, report, pick_quality). The
    same step renames the figures that said epoch for a repeat (RENAMED_4). Before schema 5 a ranks record's fed
    rate counted every step of its window: the window's samples and wall are its counted ones, in 0 waves."""
    if d.get("schema_version") == 1:
        d = {**d, "schema_version": 2, "env": d.get("env") or {}}
    if d.get("schema_version") == 2:
        d = {**d, "schema_version": 3}
        cfg = d.get("config")
        if isinstance(cfg, dict) and cfg and "shuffle" not in cfg:
            d["config"] = cfg = {**cfg, "shuffle": False}
            key = _key_of(cfg)
            if key is not None:  # a config still saying `format` is keyed by the step to 4, below
                d["config_key"] = key
    if d.get("schema_version") == 3:
        d = {**d, "schema_version": 4}
        cfg = d.get("config")
        if isinstance(cfg, dict) and "format" in cfg:
            d["config"] = cfg = _backend_named(cfg)
            key = _key_of(cfg)
            if key is not None:
                d["config_key"] = key
        for k in ("config_key", "variant_of", "best_config_key"):
            if k in d:
                d[k] = _rekey(d[k])  # a key recomputed above is already today's: left as it is
        if isinstance(d.get("predictions"), list):
            d["predictions"] = [_prediction_named(p) for p in d["predictions"]]
        d = {RENAMED_4.get(k, k): v for k, v in d.items()}
    if d.get("schema_version") == 4:
        d = {**d, "schema_version": 5}
        if d.get("kind") == "ranks" and "samples_per_rank" in d:  # its rate counted every step of the window
            d["counted_samples_per_rank"] = d["samples_per_rank"]
            d["counted_wall_s_per_rank"] = d.get("wall_s_per_rank", [])
            d["waves_per_rank"] = [0] * len(d["samples_per_rank"])
    return d


# record fields renamed at schema 4: a repeat's rate (its samples over its wall time, start-up included) was
# called an epoch's, though a repeat is an epoch only when it runs to the data's end
RENAMED_4 = {"epoch_samples_per_s_median": "repeat_samples_per_s_median",
             "epoch_samples_per_s_repeats": "repeat_samples_per_s_repeats",
             "loader_epoch_samples_per_s": "loader_repeat_samples_per_s"}


def _backend_named(cfg: dict[str, Any]) -> dict[str, Any]:
    """A schema-3 config (or a parsed key) with its `format` named `backend`, every other key as it was."""
    return {("backend" if k == "format" else k): v for k, v in cfg.items()}


def _key_of(cfg: dict[str, Any]) -> str | None:
    """LoaderConfig.key() of a config dict; None where it has keys this dataperf does not know (from_dict names
    them as damage)."""
    names = {f.name for f in dataclasses.fields(LoaderConfig)}
    return LoaderConfig(**cfg).key() if set(cfg) <= names else None


def _rekey(key: Any) -> Any:
    """A LoaderConfig key written at schema 3, as LoaderConfig.key() writes it now; any other value (a step's or
    a watch's key, "", None) as it was."""
    if not isinstance(key, str) or not key.startswith("{"):
        return key
    try:
        cfg = json.loads(key)
    except json.JSONDecodeError:
        return key
    if not isinstance(cfg, dict) or "format" not in cfg:
        return key
    cfg = _backend_named(cfg)
    new = _key_of(cfg)
    return new if new is not None else json.dumps(cfg, sort_keys=True)


def _prediction_named(p: Any) -> Any:
    """A decision's prediction ({"config": a config key, ...}) with its config upgraded as a key is."""
    if not isinstance(p, dict) or "config" not in p:
        return p
    cfg = p["config"]
    return {**p, "config": _backend_named(cfg) if isinstance(cfg, dict) else _rekey(cfg)}


_TYPES: dict[str, tuple[type, ...]] = {
    "float": (int, float), "int": (int,), "str": (str,), "bool": (bool,), "list": (list,), "dict": (dict,),
    "None": (type(None),),
}


def _type_ok(annotation: str, v: Any) -> bool:
    """Does a JSON value fit a field's annotation (as written: 'float', 'list[float]', 'int | None')?"""
    for alt in (a.strip() for a in annotation.split("|")):
        base, _, inner = alt.partition("[")
        types = _TYPES.get(base)
        if types is None:
            return True  # Any and friends
        if base == "float" and v is None:
            return True  # NaN is written as null
        if isinstance(v, bool) and base in ("int", "float"):
            continue
        if isinstance(v, types):
            if base == "list" and inner.rstrip("]") in ("float", "int"):
                return all(_type_ok(inner.rstrip("]"), x) for x in v)
            return True
    return False


def _is_float_field(cls: type, name: str) -> bool:
    f = cls.__dataclass_fields__[name]
    return f.type in ("float", float)


def load(path: str | os.PathLike) -> list[Record]:
    """Read a results file. A last line cut short (no newline: a crash while writing) is skipped, not fatal;
    any other line that is not a record is damage and named by line number."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{p} is a folder, not a results file; pass the .jsonl written by `--out`")
    if not p.is_file():
        raise UserError(f"results file not found: {p}; pass the .jsonl written by `dataperf sweep --out`")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserError(f"cannot read {p}: {e.strerror}") from None
    out: list[Record] = []
    lines = raw.split(b"\n")
    for i, bline in enumerate(lines, 1):
        if not bline.strip():
            continue
        partial = i == len(lines)  # text after the last newline: a line cut short
        try:
            d = json.loads(bline.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            if partial:
                continue
            why = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8 text"
            raise UserError(f"{p}:{i}: not valid JSON ({why}); the file is damaged") from None
        out.append(from_dict(d, f"{p}:{i}"))
    return out


def current(recs: list[Record]) -> list[Record]:
    """The latest record of each loader trial: a trial re-run by --resume supersedes its old failure."""
    last: dict[str, int] = {}
    for i, r in enumerate(recs):
        if isinstance(r, LoaderResult):
            last[f"{Path(r.data).resolve()}|{r.config_key}|{r.world_size}"] = i
    keep = set(last.values())
    return [r for i, r in enumerate(recs) if not isinstance(r, LoaderResult) or i in keep]
