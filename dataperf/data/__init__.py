"""What DATA is, resolved once: where it lives, its kind and format, its files or shards and their sizes.

Every command resolves DATA into one `Data` and passes that down (runner, loaders, cache, collectors), so a
trial never re-reads a manifest or re-scans a folder. Nothing here writes into the user's data.
"""

from __future__ import annotations

import os
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from dataperf.data.spec import (
    DEALT_BY,
    IMAGE_EXTS,
    REMOTE_SCHEMES,
    SOURCE_FORMATS,
    TOKEN_FORMATS,
    WINDOWED_FORMATS,
    Data,
    DataFile,
)
from dataperf.errors import UserError

__all__ = ["DEALT_BY", "IMAGE_EXTS", "REMOTE_SCHEMES", "SOURCE_FORMATS", "TOKEN_FORMATS", "WINDOWED_FORMATS", "Data",
           "DataFile", "as_data", "resolve", "split_options", "user_dataset"]


def as_data(data: str | os.PathLike | Data) -> Data:
    """Accept an already resolved Data (the normal path) or resolve a spec (library callers, old tests)."""
    return data if isinstance(data, Data) else resolve(str(data))


def resolve(spec: str) -> Data:
    """Turn DATA (a folder, a file, a glob, a brace pattern, or an http(s)/s3 URL) into a Data, or raise a
    UserError that names what is wrong and how to fix it."""
    from dataperf.data import local  # here, not at the top: what each needs (numpy, PIL) stays out of --help
    path, options = split_options(spec)
    if path.startswith(REMOTE_SCHEMES):
        return _resolve_remote(spec, path, options)
    if "://" in path:
        raise UserError(f"unsupported URL scheme in {path!r}; use http://, https:// or s3://")
    return local.resolve_local(spec, path, options)


def split_options(spec: str) -> tuple[str, dict[str, str]]:
    """'train.bin#dtype=uint32,tokenizer=bytes' -> ('train.bin', {'dtype': 'uint32', 'tokenizer': 'bytes'})."""
    if "#" not in spec:
        return spec, {}
    path, _, frag = spec.rpartition("#")
    if "&" in frag and "=" in frag.split("&", 1)[1]:  # URL-query habit: tiktoken read 'bytes&field=x' as one name
        raise UserError(f"data options in {spec!r} are joined with '&'; join them with a comma: "
                        f"{path}#{frag.replace('&', ',')}")
    opts: dict[str, str] = {}
    for part in frag.split(","):
        k, eq, v = part.partition("=")
        if not eq or not k.strip():
            raise UserError(f"bad data option {part!r} in {spec!r}; write DATA#key=value (dtype, tokenizer, field)")
        opts[k.strip()] = v.strip()
    unknown = set(opts) - {"dtype", "tokenizer", "field", "image", "label"}
    if unknown:
        raise UserError(f"unknown data option(s) {sorted(unknown)} in {spec!r}; known: dtype, tokenizer, field "
                        "(token files), image, label (image Parquet columns)")
    return path, opts


def user_dataset(factory: str) -> Data:
    """DATA for --dataset MODULE:FACTORY: the user's own torch Dataset, built in each trial."""
    from dataperf.data.user import check_factory

    count = check_factory(factory)
    return Data(spec=factory, location=os.getcwd(), kind="unknown", format="user-dataset", factory=factory,
                count=count)


def _resolve_remote(spec: str, url: str, options: dict[str, str]) -> Data:
    from dataperf.data import remote, tokens

    urls = remote.expand(url)
    suffixes = {os.path.splitext(urllib.parse.urlsplit(u).path)[1] for u in urls}
    if suffixes == {".tar"}:
        if options:
            raise UserError(f"data options {sorted(options)} apply to token files, not to WebDataset shards")
        return Data(spec=spec, location=urls[0], kind="image", format="webdataset",
                    files=[DataFile(u, s) for u, s in zip(urls, _sizes(urls), strict=True)], remote=True)
    if len(suffixes) == 1 and next(iter(suffixes)) in TOKEN_FORMATS:
        fmt = TOKEN_FORMATS[next(iter(suffixes))]
        d = Data(spec=spec, location=urls[0], kind="tokens", format=fmt, remote=True, options=options,
                 files=[DataFile(u, s) for u, s in zip(urls, _sizes(urls), strict=True)])
        tokens.check(d)
        return d
    raise UserError(f"remote DATA must be WebDataset .tar shards or token files of one kind "
                    f"(.bin/.npy/.jsonl/.parquet); {spec!r} has {sorted(suffixes)}")


def _sizes(urls: list[str]) -> list[int | None]:
    from dataperf.data import remote

    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as ex:
        return list(ex.map(remote.stat, urls))
