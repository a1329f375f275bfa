"""Remote data over http(s):// and s3:// (fsspec + s3fs, extra dataperf[s3]): WebDataset shards, streamed;
token files, read where they lie: `.bin`/`.npy` windows and Parquet pages by byte-range requests (HTTP
`Range`, S3 ranged GET), JSONL streamed.

dataperf opens remote data itself rather than through webdataset's `pipe:curl` / gopen: the stream is
read in-process, so a dead server or a 404 is a Python exception with the URL in it (not a curl exit status
found mid-epoch), and no curl/aws binary is needed on the training host.
Every file is checked (HEAD, or an S3 stat) before measuring, which also gives its size; a server that
ignores Range requests is refused then too, for the formats that need them.
"""

from __future__ import annotations

import http.client
import io
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import IO, Any

import numpy as np

from dataperf.errors import UserError

TIMEOUT_S = 10.0
# a GET a server fails (5xx) or a connection it drops is tried again after BACKOFF_S, then twice that, ... up to
# RETRIES times: one transient error must not fail a trial (a timeout is not retried: its wait was long enough)
RETRIES = 3
BACKOFF_S = 0.25
S3_EXTRA = "install it with `pip install 'dataperf[s3]'`"
RANGE_FORMATS = ("tokens-bin", "npy", "parquet")  # read by byte ranges; JSONL is streamed end to end
NPY_HEAD_BYTES = 4096  # enough for any .npy header dataperf accepts (1-d or 2-d integer arrays)


def expand(url: str) -> list[str]:
    """Brace patterns for any scheme; globs and folders (a trailing /) only where listing exists (s3)."""
    import braceexpand

    urls = list(braceexpand.braceexpand(url))
    if url.startswith("s3://"):
        fs = s3_filesystem()
        out: list[str] = []
        for u in urls:
            if u.endswith("/") or any(c in u for c in "*?["):
                pattern = u + "*.tar" if u.endswith("/") else u  # a folder means its shards
                try:
                    out += ["s3://" + p for p in sorted(fs.glob(pattern))]
                except Exception as e:
                    raise UserError(f"cannot list {pattern}: {_why(e)}") from None
            else:
                out.append(u)
        if not out:
            _no_bucket(fs, url)
            raise UserError(f"no .tar shard found at {url}")
        return out
    if any(u.endswith("/") or any(c in u for c in "*?[") for u in urls):
        raise UserError(f"http(s) cannot list a folder or a glob ({url}); give the shards as a brace pattern, "
                        "e.g. https://host/train-{0000..0146}.tar")
    return urls


def _no_bucket(fs: Any, url: str) -> None:
    """A UserError when the bucket of an s3:// URL where nothing was found does not exist: an empty listing
    or a missing key says nothing about which part of the URL is wrong."""
    bucket = url.removeprefix("s3://").split("/", 1)[0]
    try:
        fs.info(bucket)
    except FileNotFoundError:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS"
        raise UserError(f"S3 bucket {bucket!r} does not exist (at {endpoint}); check the bucket name in {url}, "
                        "or the endpoint (AWS_ENDPOINT_URL)") from None
    except Exception:  # no right to see the bucket itself: the caller's own message stands
        return


class FetchError(OSError):
    """A remote file that could not be fetched; the message names the URL and the server's answer."""


def _transient(e: BaseException) -> bool:
    """A failure worth another try: a server error (5xx), a connection refused, reset or closed mid-answer."""
    if isinstance(e, urllib.error.HTTPError):
        return e.code >= 500
    if isinstance(e, urllib.error.URLError):
        e = e.reason if isinstance(e.reason, BaseException) else e
    return isinstance(e, (ConnectionError, http.client.HTTPException)) and not isinstance(e, TimeoutError)


def _backoff(attempt: int) -> None:
    time.sleep(BACKOFF_S * 2**attempt)


def _why(e: BaseException) -> str:
    if isinstance(e, FetchError):
        return str(e)
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        return f"unreachable ({e.reason})"
    return f"{type(e).__name__}: {e}".strip()


def stat(url: str) -> int | None:
    """Size of one remote shard; a UserError if it cannot be reached (found before measuring)."""
    if url.startswith("s3://"):
        try:
            return int(s3_filesystem().info(url)["size"])
        except FileNotFoundError:
            _no_bucket(s3_filesystem(), url)
            raise UserError(f"{url} does not exist (check the key)") from None
        except Exception as e:
            raise UserError(f"cannot reach {url}: {_why(e)}; check the endpoint (AWS_ENDPOINT_URL) and "
                            "credentials") from None
    req = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            n = r.headers.get("Content-Length")
            return int(n) if n is not None else None
    except urllib.error.HTTPError as e:
        if e.code in (405, 501):  # a server without HEAD: the shard is there if GET opens
            try:
                with open_url(url):
                    return None
            except OSError as get:
                raise UserError(str(get)) from None
        raise UserError(f"cannot fetch {url}: {_why(e)}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise UserError(f"cannot fetch {url}: {_why(e)}; is the server up and the URL right?") from None


def s3_filesystem():
    try:
        import fsspec
        import s3fs  # noqa: F401  (fsspec needs it for s3://)
    except ImportError:
        raise UserError(f"s3:// data needs s3fs, which is not installed: {S3_EXTRA}") from None
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    kw: dict[str, Any] = {"client_kwargs": {"endpoint_url": endpoint}} if endpoint else {}
    return fsspec.filesystem("s3", skip_instance_cache=True, **kw)


def open_url(url: str) -> IO[bytes]:
    """A remote file opened for streaming; a server error or a dropped connection is retried with back-off, and
    a failure is a FetchError naming the URL and the server's answer."""
    if url.startswith("s3://"):
        return s3_filesystem().open(url, "rb", block_size=8 * 2**20)
    attempt = 0
    while True:
        try:
            return urllib.request.urlopen(url, timeout=TIMEOUT_S)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            if attempt == RETRIES or not _transient(e):
                tries = f" (tried {attempt + 1} times)" if attempt else ""
                raise FetchError(f"cannot fetch {url}: {_why(e)}{tries}") from None
            _backoff(attempt)
            attempt += 1


def url_opener(src):
    """A webdataset pipeline stage: {url} -> {url, stream}, opened here, not through gopen."""
    for sample in src:
        try:
            sample["stream"] = open_url(sample["url"])
        except Exception as e:
            raise FetchError(_why(e) if isinstance(e, FetchError) else f"cannot fetch {sample['url']}: {_why(e)}") \
                from None
        yield sample


_clients: dict[tuple, Any] = {}  # per process (the pid is in the key): forked workers open their own


def _s3() -> Any:
    key = ("s3", os.getpid())
    if key not in _clients:
        _clients[key] = s3_filesystem()
    return _clients[key]


def _http(u: urllib.parse.SplitResult) -> http.client.HTTPConnection:
    """A kept-alive connection to the host (re-opened by http.client when a server closes it)."""
    key = (u.scheme, u.hostname, u.port, os.getpid())
    if key not in _clients:
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        _clients[key] = cls(u.hostname or "", u.port, timeout=TIMEOUT_S)
    return _clients[key]


def read_range(url: str, start: int, stop: int) -> bytes:
    """Bytes [start, stop) of a remote file: one HTTP Range request or one S3 ranged GET. Raises OSError
    (with the URL) when the server fails, or answers a Range request with anything but those bytes."""
    if stop <= start:
        return b""
    if url.startswith("s3://"):
        try:
            body = _s3().cat_file(url, start=start, end=stop)
        except Exception as e:
            raise OSError(f"cannot read bytes {start}-{stop - 1} of {url}: {_why(e)}") from None
    else:
        u = urllib.parse.urlsplit(url)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        # a kept-alive connection the server has dropped fails once: retried at once on a new one; a server
        # error (5xx) or another dropped connection after back-off
        for attempt in range(RETRIES + 1):
            conn = _http(u)
            try:
                conn.request("GET", path, headers={"Range": f"bytes={start}-{stop - 1}"})
                r = conn.getresponse()
                body = r.read()
            except (http.client.HTTPException, OSError) as e:
                conn.close()
                if attempt == RETRIES or (attempt and not _transient(e)):
                    raise OSError(f"cannot read bytes {start}-{stop - 1} of {url}: {_why(e)}") from None
                if attempt:
                    _backoff(attempt - 1)
                continue
            if r.status < 500 or attempt == RETRIES:
                break
            _backoff(attempt)
        if r.status != 206:
            why = "the server ignores Range requests" if r.status == 200 else f"HTTP {r.status} {r.reason}"
            raise NoRanges(f"cannot read bytes {start}-{stop - 1} of {url}: {why}")
    if len(body) != stop - start:
        raise OSError(f"{url}: asked for bytes {start}-{stop - 1}, got {len(body)} bytes")
    return body


class NoRanges(OSError):
    """The server answered a Range request, but not with the range (200: the whole file, or an error status)."""


def range_error(e: OSError, url: str) -> UserError:
    """A failed ranged read as one error line: a server without Range support is told to change servers, one that
    stopped answering is not (that advice would be wrong for it)."""
    if isinstance(e, NoRanges):
        return UserError(f"{e}; serve it from a server that answers HTTP Range requests (any static file "
                         "server, S3), or copy the file locally")
    return UserError(f"{e}; the server stopped answering: check that it is up and serves {url}")


def check_ranges(url: str) -> None:
    """Refuse, before measuring, a file whose server cannot serve byte ranges."""
    try:
        read_range(url, 0, 1)
    except OSError as e:
        raise range_error(e, url) from None


class RangeFile(io.RawIOBase):
    """A remote file as a seekable binary file (Parquet reads its footer, then the row groups it needs); wrap
    it in io.BufferedReader so small reads share one request."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(base + offset, 0)
        return self.pos

    def readinto(self, b) -> int:
        n = max(min(len(b), self.size - self.pos), 0)
        if n:
            b[:n] = read_range(self.url, self.pos, self.pos + n)
            self.pos += n
        return n


def open_ranges(url: str, size: int, buffer_bytes: int = 2**20) -> io.BufferedReader:
    return io.BufferedReader(RangeFile(url, size), buffer_size=buffer_bytes)


class RemoteArray:
    """The part of a memory-mapped array token windows need (len, ndim, shape, [row], [a:b]), read from a
    remote file by byte ranges: each window or row is one request, as a loader over object storage does."""

    def __init__(self, url: str, dtype: np.dtype, shape: tuple[int, ...], offset: int = 0):
        self.url, self.dtype, self.shape, self.offset = url, np.dtype(dtype), shape, offset
        self.ndim = len(shape)
        self.row_items = int(np.prod(shape[1:])) if self.ndim > 1 else 1

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, k: int | slice) -> np.ndarray:
        if isinstance(k, slice):
            a, b, _ = k.indices(self.shape[0])
            items = self.row_items * max(b - a, 0)
            shape: tuple[int, ...] = (max(b - a, 0), *self.shape[1:])
        else:
            a, items, shape = k, self.row_items, self.shape[1:]
        start = self.offset + a * self.row_items * self.dtype.itemsize
        raw = read_range(self.url, start, start + items * self.dtype.itemsize)
        return np.frombuffer(raw, dtype=self.dtype).reshape(shape)

    @classmethod
    def from_bin(cls, url: str, dtype: str | np.dtype, size: int) -> RemoteArray:
        return cls(url, np.dtype(dtype), (size // np.dtype(dtype).itemsize,))

    @classmethod
    def from_npy(cls, url: str, size: int) -> RemoteArray:
        """Parse the .npy header from the file's first bytes (one range request)."""
        head = io.BytesIO(read_range(url, 0, min(size, NPY_HEAD_BYTES)))
        try:
            version = np.lib.format.read_magic(head)
            read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in read:
                raise ValueError(f".npy format version {version} (save it with numpy's default, 1.0)")
            shape, fortran, dtype = read[version](head)
        except (ValueError, EOFError) as e:
            raise ValueError(f"not a .npy file, or its header is over {NPY_HEAD_BYTES} bytes ({e})") from None
        if fortran and len(shape) > 1:
            raise ValueError("a Fortran-ordered array; save it C-ordered")
        return cls(url, dtype, tuple(shape), head.tell())
