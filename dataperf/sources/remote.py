"""Remote WebDataset shards over http(s):// (stdlib urllib) and s3:// (fsspec + s3fs, extra dataperf[s3]).

dataperf opens remote shards itself rather than through webdataset's `pipe:curl` / gopen: the stream is
read in-process, so a dead server or a 404 is a Python exception with the URL in it (not a curl exit status
found mid-epoch), and no curl/aws binary is needed on the training host.
Every shard is checked (HEAD, or an S3 stat) before measuring, which also gives its size.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from dataperf.errors import UserError
from dataperf.sources import Data, DataFile

TIMEOUT_S = 10.0
S3_EXTRA = "install it with `pip install 'dataperf[s3]'`"


def resolve_remote(spec: str, url: str, options: dict[str, str]) -> Data:
    if options:
        raise UserError(f"data options {sorted(options)} apply to local token files, not to remote shards")
    urls = expand(url)
    bad = [u for u in urls if not u.endswith(".tar")]
    if bad:
        raise UserError(f"remote DATA must be WebDataset .tar shards; {bad[0]} is not")
    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as ex:
        sizes = list(ex.map(stat, urls))
    return Data(spec=spec, location=urls[0], kind="image", format="webdataset",
                files=[DataFile(u, s) for u, s in zip(urls, sizes, strict=True)], remote=True)


def expand(url: str) -> list[str]:
    """Brace patterns for any scheme; globs and folders (a trailing /) only where listing exists (s3)."""
    import braceexpand

    urls = list(braceexpand.braceexpand(url))
    if url.startswith("s3://"):
        fs = s3_filesystem()
        out: list[str] = []
        for u in urls:
            if u.endswith("/") or any(c in u for c in "*?["):
                pattern = u + "*.tar" if u.endswith("/") else u
                try:
                    out += ["s3://" + p for p in sorted(fs.glob(pattern))]
                except Exception as e:
                    raise UserError(f"cannot list {pattern}: {_why(e)}") from None
            else:
                out.append(u)
        if not out:
            raise UserError(f"no .tar shard found at {url}")
        return out
    if any(u.endswith("/") or any(c in u for c in "*?[") for u in urls):
        raise UserError(f"http(s) cannot list a folder or a glob ({url}); give the shards as a brace pattern, "
                        "e.g. https://host/train-{0000..0146}.tar")
    return urls


def _why(e: BaseException) -> str:
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
            raise UserError(f"{url} does not exist (check bucket and key)") from None
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
            with open_url(url):
                return None
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
    if url.startswith("s3://"):
        return s3_filesystem().open(url, "rb", block_size=8 * 2**20)
    return urllib.request.urlopen(url, timeout=TIMEOUT_S)


def url_opener(src):
    """A webdataset pipeline stage: {url} -> {url, stream}, opened here, not through gopen."""
    for sample in src:
        try:
            sample["stream"] = open_url(sample["url"])
        except Exception as e:
            raise OSError(f"cannot fetch {sample['url']}: {_why(e)}") from None
        yield sample
