"""Token data as LLM training stores it: a flat uint16/uint32 .bin memmap (nanoGPT / Megatron), .npy arrays,
and text in JSONL or Parquet tokenized on the fly (tokenization is the LLM loader's prep cost). Local files are
memory-mapped; remote ones (http(s)://, s3://) are read by byte ranges (data/remote.py).

With decode off a sample is its stored bytes; with decode on it is an int64 tensor of token ids.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from dataperf import stages
from dataperf.data.spec import Data, DataFile
from dataperf.errors import UserError

DTYPES = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32,
          "uint32": np.uint32, "int64": np.int64}
# Megatron's .idx header: 9-byte magic, 8-byte version (1), 1-byte dtype code (megatron/core/datasets/
# indexed_dataset.py, DType); float codes are Megatron's too, but hold no token ids
MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
MEGATRON_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float64", 7: "float32",
                   8: "uint16"}
DEFAULT_WINDOW = 512
TEXT_EXTRA = "install it with `pip install 'dataperf[text]'`"


def windowed(data: Data) -> bool:
    """A flat token stream (.bin, 1-d .npy) is cut into --seq-len windows; other data has no seq_len (Data.windowed)."""
    return data.windowed


def window_len(cfg: Any) -> int:
    """Tokens per sample cut from a flat token stream: --seq-len, else --cap, else 512."""
    return cfg.seq_len or cfg.cap_tokens or DEFAULT_WINDOW


def bin_dtype(data: Data, path: str) -> str:
    """dtype from DATA#dtype=..., else a Megatron .idx beside a local .bin, else nanoGPT's uint16."""
    if "dtype" in data.options:
        if data.options["dtype"] not in DTYPES:
            raise UserError(f"dtype {data.options['dtype']!r} not supported; use one of {sorted(DTYPES)}")
        return data.options["dtype"]
    idx = Path(path).with_suffix(".idx")
    if not data.remote and idx.is_file():
        return megatron_dtype(idx) or "uint16"
    return "uint16"


def megatron_dtype(idx: Path) -> str | None:
    """The token dtype a Megatron .idx declares, None for a file without Megatron's magic; a header that has
    the magic but a dtype no token file can have, or is damaged, is a UserError: guessing would read the .bin
    at the wrong width and record wrong figures as if right."""
    with open(idx, "rb") as f:
        head = f.read(18)
    if head[:9] != MEGATRON_MAGIC:
        return None
    fix = f"rebuild it with Megatron's preprocess_data.py, or move it away and give {idx.with_suffix('.bin')}" \
          "#dtype="
    version, code = int.from_bytes(head[9:17], "little"), head[17] if len(head) == 18 else None
    if version != 1 or code not in MEGATRON_DTYPES:
        raise UserError(f"{idx} has Megatron's magic but a damaged header (version {version}, dtype code "
                        f"{'missing' if code is None else code}; Megatron writes version 1 and codes 1-8); {fix}")
    name = MEGATRON_DTYPES[code]
    if name not in DTYPES:
        raise UserError(f"{idx} declares {name} tokens (Megatron dtype code {code}); token ids are integers and "
                        f"dataperf reads {', '.join(DTYPES)}; {fix}")
    return name


def idx_note(data: Data, path: str) -> str | None:
    """A note when an .idx beside a local .bin is not Megatron's, so its dtype was not read from it."""
    idx = Path(path).with_suffix(".idx")
    if "dtype" in data.options or data.remote or not idx.is_file() or megatron_dtype(idx) is not None:
        return None
    return (f"{idx} is not a Megatron index (no MMIDIDX magic), so it gives no dtype: {path} is read as uint16 "
            "(nanoGPT's); give DATA#dtype= if it holds another")


def tokenizer(data: Data) -> Callable[[str], list[int]]:
    """tiktoken's encoding named by DATA#tokenizer=NAME (default gpt2), or 'bytes' (UTF-8 bytes as ids)."""
    name = data.options.get("tokenizer", "gpt2")
    if name == "bytes":
        return lambda text: list(text.encode("utf-8"))
    try:
        import tiktoken
    except ImportError:
        raise UserError(f"tokenizing text needs tiktoken, which is not installed: {TEXT_EXTRA}, "
                        "or use DATA#tokenizer=bytes") from None
    try:
        enc = tiktoken.get_encoding(name)
    except Exception as e:  # unknown name, or its BPE file cannot be fetched offline
        why = " ".join(str(e).split())  # tiktoken's text spans lines (plugins, version): one error line
        raise UserError(f"tiktoken cannot load encoding {name!r} ({type(e).__name__}: {why}); pre-fill "
                        "TIKTOKEN_CACHE_DIR on an offline machine, or use DATA#tokenizer=bytes") from None
    return enc.encode_ordinary


def open_array(data: Data, f: DataFile, dtype: str | None) -> Any:
    """A .bin (its dtype given) or .npy token array: memory-mapped when local, read by byte ranges when remote."""
    if data.remote:
        from dataperf.data.remote import RemoteArray

        size = f.size_bytes or 0
        return RemoteArray.from_bin(f.path, dtype, size) if dtype else RemoteArray.from_npy(f.path, size)
    if dtype:
        return np.memmap(f.path, dtype=DTYPES[dtype], mode="r")
    return np.load(f.path, mmap_mode="r", allow_pickle=False)


def check(data: Data) -> None:
    """Everything that would fail later, found before measuring: dtype, file sizes, extras, text field, and
    for remote files that the server serves byte ranges."""
    from dataperf.data.remote import RANGE_FORMATS, check_ranges, range_error

    arrs = []
    for f in data.files:
        if data.remote and data.format in RANGE_FORMATS and f.size_bytes is None:
            raise UserError(f"the size of {f.path} is unknown (the server sent no Content-Length), and it is "
                            "read by byte ranges from its end and middle; serve it with one")
        if data.format == "tokens-bin":
            if f.size_bytes == 0:
                raise UserError(f"{f.path} is empty (0 bytes): no tokens to read; leave it out of DATA")
            dt = bin_dtype(data, f.path)
            note = idx_note(data, f.path)
            if note:
                data.notes.append(note)
            if (f.size_bytes or 0) % np.dtype(DTYPES[dt]).itemsize:
                raise UserError(f"{f.path} is {f.size_bytes} bytes, not a whole number of {dt} "
                                "tokens; give the right DATA#dtype=")
            if data.remote:
                check_ranges(f.path)
        elif data.format == "npy":
            try:
                arr = open_array(data, f, None)
            except EOFError:  # numpy's word for a 0-byte file; left alone, click takes it for Ctrl-C
                raise UserError(f"{f.path} is empty (0 bytes), not a .npy file; leave it out of DATA") from None
            except ValueError as e:
                raise UserError(f"{f.path} is not a plain .npy array ({e})") from None
            except OSError as e:
                raise (range_error(e, f.path) if data.remote else UserError(f"cannot read {f.path}: {e}")) from None
            if arr.ndim not in (1, 2) or arr.dtype.kind not in "iu":
                raise UserError(f"{f.path} holds a {arr.ndim}-d {arr.dtype} array; token .npy must be 1-d (a "
                                "flat stream) or 2-d (one sequence per row) of integer ids")
            arrs.append(arr)
    if data.format in ("jsonl", "parquet"):
        if data.format == "parquet":
            _pyarrow()
        tokenizer(data)
        try:
            first = next(iter_texts(data, data.files[0]), None)
        except OSError as e:
            how = "Parquet is read by HTTP Range requests" if data.format == "parquet" else "JSONL is streamed"
            raise UserError(f"{e}; check that the server is up and serves it ({how})") from None
        if first is None:
            raise UserError(f"{data.files[0].path} holds no text in field {data.options.get('field', 'text')!r}; "
                            "name the field with DATA#field=NAME")
    if arrs and all(a.ndim == 2 for a in arrs):
        data.count = sum(a.shape[0] for a in arrs)


def _pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(f"reading Parquet needs pyarrow, which is not installed: {TEXT_EXTRA}") from None
    return pq


def iter_texts(data: Data, f: DataFile) -> Iterator[str]:
    """The texts of one file in order: JSONL streamed line by line, Parquet read one row group at a time (a
    remote Parquet file through byte ranges: its footer, then the column it needs)."""
    from dataperf.data import remote

    key = data.options.get("field", "text")
    if data.format == "jsonl":
        with (remote.open_url(f.path) if data.remote else open(f.path, "rb")) as raw:
            for n, line in enumerate(raw, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
                    why = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
                    raise UserError(f"{f.path} line {n} is not JSON ({why}); fix or drop that line") from None
                if not isinstance(row, dict):
                    raise UserError(f"{f.path} line {n} is a JSON {type(row).__name__}, not an object with a "
                                    f"{key!r} field; fix or drop that line")
                v = row.get(key)
                if isinstance(v, str):
                    yield v
        return
    pq = _pyarrow()
    import pyarrow

    try:
        pf = pq.ParquetFile(remote.open_ranges(f.path, f.size_bytes or 0) if data.remote else f.path)
    except pyarrow.ArrowInvalid as e:  # no Parquet footer: empty, cut short, or another format
        raise UserError(f"{f.path} is not a Parquet file ({' '.join(str(e).split())}); point DATA at Parquet "
                        "files, or name them for what they hold") from None
    if key not in pf.schema_arrow.names:
        return
    for i in range(pf.num_row_groups):
        yield from (t for t in pf.read_row_group(i, columns=[key]).column(0).to_pylist() if isinstance(t, str))


class WindowDataset(Dataset):
    """Fixed-length windows at seeded random offsets of a flat token stream (nanoGPT's get_batch), one epoch =
    as many windows as the stream holds end to end; with shuffle off, those windows back to back in storage
    order. Files are memory-mapped lazily in each worker."""

    def __init__(self, data: Data, cfg: Any, seed: int = 0):
        self.data = data
        self.files = [f.path for f in data.files]
        self.dtypes = [bin_dtype(data, p) if data.format == "tokens-bin" else None for p in self.files]
        self.decode, self.cap = cfg.decode, cfg.cap_tokens
        self.L = window_len(cfg)
        self._maps: list[np.ndarray] | None = None
        rng = np.random.default_rng(seed)
        self.index: list[tuple[int, int]] = []
        for i, a in enumerate(self._open()):
            if a.ndim == 2:
                self.index += [(i, r) for r in range(a.shape[0])]
                continue
            n = len(a) // self.L
            if n == 0:
                raise UserError(f"{self.files[i]} holds {len(a)} tokens, fewer than one window of {self.L}; "
                                "use a smaller --seq-len")
            offsets = rng.integers(0, len(a) - self.L + 1, size=n) if cfg.shuffle else np.arange(n) * self.L
            self.index += [(i, int(o)) for o in offsets]
        self._maps = None  # not pickled into workers: each opens its own maps

    def _open(self) -> list[np.ndarray]:
        if self._maps is None:
            self._maps = [open_array(self.data, f, dt) for f, dt in zip(self.data.files, self.dtypes, strict=True)]
        return self._maps

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> dict[str, Any]:
        t = time.perf_counter()
        i, o = self.index[k]
        a = self._open()[i]
        w = np.array(a[o] if a.ndim == 2 else a[o:o + self.L])
        if self.cap:
            w = w[: self.cap]
        t = stages.book("read", t)
        if not self.decode:
            return {"nbytes": w.nbytes, "y": 0, "payload": w.tobytes(), "tokens": len(w)}
        x = torch.from_numpy(w.astype(np.int64))
        stages.book("decode", t)
        return {"nbytes": w.nbytes, "y": 0, "x": x}


class TextDataset(IterableDataset):
    """JSONL / Parquet text, tokenized in the loader's workers; files are split across workers and ranks."""

    def __init__(self, data: Data, cfg: Any, rank: int = 0, world_size: int = 1):
        self.data, self.decode, self.cap = data, cfg.decode, cfg.cap_tokens
        self.rank, self.world_size = rank, world_size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        wi = get_worker_info()
        n_workers, wid = (wi.num_workers, wi.id) if wi else (1, 0)
        share, of = self.rank * n_workers + wid, self.world_size * n_workers
        encode = tokenizer(self.data) if self.decode else None
        k = 0
        for f in self.data.files:
            for text in stages.timed("read", iter_texts(self.data, f)):
                k += 1
                if (k - 1) % of != share:
                    continue
                raw = text.encode("utf-8")
                if encode is None:
                    yield {"nbytes": len(raw), "y": 0, "payload": raw}
                    continue
                t = time.perf_counter()
                ids = encode(text)[: self.cap] if self.cap else encode(text)
                x = torch.tensor(ids or [0], dtype=torch.long)
                stages.book("decode", t)  # tokenizing
                yield {"nbytes": len(raw), "y": 0, "x": x}
