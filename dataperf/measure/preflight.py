"""Checks made before any measuring starts: outputs that can be written, and sizes the machine can hold.

A typo in --image-size or --num-workers must not OOM or fork-bomb the machine, and a read-only --out must not
surface as a traceback after an hour of measuring. Every check raises UserError naming the problem and the fix.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dataperf.data.sizes import available_mib, check_image_side
from dataperf.errors import UserError
from dataperf.results import MIB, TORCH_PREFETCH_FACTOR

WORKER_MIB = 100  # floor of what one DataLoader worker process costs (interpreter, torch, its batches)
WORKERS_PER_CORE = 4  # a sweep tries up to 2x cores; far past that workers only contend
SHM = Path("/dev/shm")


def _existing_parent(p: Path) -> Path:
    q = p.absolute().parent
    while not q.exists() and q != q.parent:
        q = q.parent
    return q


def writable_file(path: Path | None, option: str) -> None:
    """The file (or, if it does not exist yet, the folder it would be created in) can be written."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{option} {p} is a folder; give a file path, e.g. {p / 'results.jsonl'}")
    if p.is_symlink() and not p.exists():
        raise UserError(f"{option} {p} is a dangling symlink; remove it or choose another path")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise UserError(f"{option} {p} cannot be written (read-only file or file system); "
                            "choose another path")
        return
    _writable_parent(p, option)


def writable_dir(path: Path | None, option: str) -> None:
    """The folder exists and is writable, or can be created."""
    if path is None:
        return
    p = Path(path)
    if p.is_symlink() and not p.exists():
        raise UserError(f"{option} {p} is a dangling symlink; remove it or choose another path")
    if p.exists() and not p.is_dir():
        raise UserError(f"{option} {p} exists and is not a folder; choose another path")
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise UserError(f"{option} {p} cannot be written (read-only or permission denied); "
                            "choose another path")
        return
    _writable_parent(p, option)


def _writable_parent(p: Path, option: str) -> None:
    q = _existing_parent(p)
    if not q.is_dir():
        raise UserError(f"{option} {p}: {q} is not a folder; choose another path")
    if not os.access(q, os.W_OK | os.X_OK):
        raise UserError(f"{option} {p}: cannot create it in {q} (read-only or permission denied); "
                        "choose another path")


def shm_free_mib() -> float | None:
    try:
        return shutil.disk_usage(SHM).free / MIB
    except OSError:
        return None


def max_workers() -> int:
    """The most workers a command accepts: WORKERS_PER_CORE x the cores (at least 8)."""
    return max(WORKERS_PER_CORE * (os.cpu_count() or 1), 8)


def check_workers(n: int, option: str = "--num-workers") -> None:
    if n < 0:
        raise UserError(f"{option} must be >= 0, got {n}")
    cores = os.cpu_count() or 1
    limit = max_workers()
    if n > limit:
        raise UserError(f"{option} {n} is more than {WORKERS_PER_CORE}x this machine's {cores} cores "
                        f"(limit {limit}); past that, workers only contend. Use at most {limit}")
    if n * WORKER_MIB > available_mib():
        raise UserError(f"{option} {n}: {n} worker processes need at least {n * WORKER_MIB} MiB, but only "
                        f"{available_mib():.0f} MiB of memory is free; use fewer workers")


def check_batch_memory(batch_bytes: float, num_workers: int, prefetch_factor: int | None, what: str) -> None:
    """Decoded batches in flight must fit free memory, and with workers /dev/shm, where torch puts the
    tensors workers hand to the main process: when shm runs out a worker dies with "Bus error"."""
    in_flight = num_workers * (prefetch_factor or TORCH_PREFETCH_FACTOR) if num_workers else 1
    need = batch_bytes * (in_flight + 1) / MIB
    if need > 0.8 * available_mib():
        raise UserError(f"{what}: {in_flight} batches in flight of {batch_bytes / MIB:.0f} MiB each need "
                        f"{need:.0f} MiB, more than the {available_mib():.0f} MiB of free memory; lower "
                        "--batch-size, --image-size, --num-workers or --prefetch-factor")
    shm = shm_free_mib()
    shm_need = batch_bytes * in_flight / MIB
    if num_workers and shm is not None and shm_need > shm:
        raise UserError(f"{what}: workers would hand {in_flight} batches of {batch_bytes / MIB:.0f} MiB "
                        f"({shm_need:.0f} MiB) through /dev/shm, which has {shm:.0f} MiB free; the DataLoader "
                        "would die with 'Bus error'. Lower --batch-size, --num-workers or --prefetch-factor, "
                        "or enlarge /dev/shm (docker: --shm-size)")


def decoded_batch_bytes(kind: str, batch_size: int, image_size: int, max_tokens: int | None) -> float:
    """Bytes of one decoded batch: uint8 images, or int64 tokens padded to the longest sequence."""
    if kind == "tokens":
        return batch_size * (max_tokens or 0) * 8
    return batch_size * 3 * image_size * image_size


def model_max_seq_len(model) -> int | None:
    """The longest sequence a model's position table holds (None if it has none we can see)."""
    pos = getattr(model, "pos", None)
    return getattr(pos, "num_embeddings", None)


def check_model(spec: str, data_kind: str | None = None, input_kind: str | None = None,
                seq_len: int | None = None) -> None:
    """Import and build --model now (not after the grid has run) and check it fits the data it will eat."""
    from dataperf.measure.models import load_model

    model = load_model(spec)
    if not any(p.requires_grad for p in model.parameters()):
        raise UserError(f"--model {spec} has no trainable parameters; a train step needs some")
    kind = input_kind or getattr(model, "input_kind", None)
    if data_kind in ("image", "tokens") and kind in ("image", "tokens") and kind != data_kind:
        raise UserError(f"--model {spec} takes {kind} input but the dataset holds {data_kind}; use a "
                        f"{'gpt-*' if data_kind == 'tokens' else 'cnn-small'} model or a {kind} dataset")
    if seq_len is not None:
        if seq_len < 1:
            raise UserError(f"--seq-len must be at least 1, got {seq_len}")
        longest = model_max_seq_len(model)
        if longest is not None and seq_len > longest:
            raise UserError(f"sequence length {seq_len} is longer than --model {spec} holds ({longest} "
                            f"positions); use --seq-len / --cap of at most {longest}")


def check_loader(data, cfg) -> None:
    """A loader config against the machine: workers, image size, and decoded batches in memory and shm.
    data: a resolved data.Data (or a path); sizes come from its manifest when it has one."""
    from dataperf.data import as_data

    data = as_data(data)
    m = data.manifest
    from dataperf import backends

    be = backends.REGISTRY.get(cfg.backend)
    if be is not None and be.preflight is not None:  # installed, its cluster answers: once, not in each trial
        be.preflight(cfg)
    check_workers(cfg.num_workers)
    if cfg.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {cfg.batch_size}")
    if cfg.cap_tokens is not None and cfg.cap_tokens < 1:
        raise UserError(f"--cap must be at least 1 token, got {cfg.cap_tokens}")
    if cfg.seq_len is not None and cfg.seq_len < 1:
        raise UserError(f"--seq-len must be at least 1 token, got {cfg.seq_len}")
    if not cfg.decode:
        if m is not None:
            biggest = max(m.sample_bytes, default=0)
            check_batch_memory(cfg.batch_size * biggest, 0, None, f"batches of {cfg.batch_size} raw samples")
        return
    kind = m.kind if m is not None else data.kind
    if kind == "tokens":
        if m is not None and m.token_lengths:
            longest = min(max(m.token_lengths), cfg.cap_tokens or 1 << 62)
        elif cfg.seq_len is not None:
            longest = min(cfg.seq_len, cfg.cap_tokens or 1 << 62)
        else:
            return  # lengths unknown until tokenized (text files): nothing to bound here
        nbytes = decoded_batch_bytes("tokens", cfg.batch_size, cfg.image_size, longest)
    elif kind == "image":
        check_image_side(cfg.image_size)
        nbytes = decoded_batch_bytes("image", cfg.batch_size, cfg.image_size, None)
    else:
        return  # a user's Dataset: its samples are its own
    check_batch_memory(nbytes, cfg.num_workers, cfg.explicit().prefetch_factor, f"{cfg.short()}")


def check_fed(data, cfg, model: str, input_kind: str | None) -> None:
    """The loader feeding --model: the loader's bounds, and a model that eats what the dataset holds
    (image vs tokens, and token lengths within the model's positions)."""
    from dataclasses import replace

    from dataperf.data import as_data

    data = as_data(data)
    check_loader(data, replace(cfg, decode=True))
    m = data.manifest
    kind = (m.kind if m is not None else data.kind)
    kind = kind if kind in ("image", "tokens") else None
    seq = None
    if (input_kind or kind) == "tokens":
        if m is not None and m.token_lengths:
            seq = min(max(m.token_lengths), cfg.cap_tokens or 1 << 62)
        elif cfg.seq_len is not None:
            seq = min(cfg.seq_len, cfg.cap_tokens or 1 << 62)
    check_model(model, kind, input_kind, seq)

