"""torch Datasets for the DATA forms the files/webdataset backends in backends/dataloader.py do not cover:
token files, the user's own Dataset, and the stages that read WebDataset shards over the
network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dataperf.data import Data
from dataperf.errors import TrialError


def make_source_dataset(data: Data, cfg: Any, rank: int = 0, world_size: int = 1, seed: int = 0,
                        convert: Callable[[Any, str], Any] | None = None):
    """The Dataset of token files or of the user's own; convert (another loader's folder): applied to each of
    its reader's samples, naming it."""
    if cfg.backend != data.format:
        raise TrialError(f"backend {cfg.backend} asked for, but {data.spec} holds {data.format}; "
                         "use --backend auto")
    if data.format == "user-dataset":
        from dataperf.data.user import build_dataset, reader_dataset

        if "reader" in data.options:
            return reader_dataset(data, cfg.batch_size, convert)
        return build_dataset(data.factory or "")
    from dataperf.data import tokens

    if data.format in ("tokens-bin", "npy"):
        return tokens.WindowDataset(data, cfg, seed)
    return tokens.TextDataset(data, cfg, rank, world_size)


def remote_tar_samples() -> list[Callable[..., Any]]:
    """webdataset pipeline stages turning {url} into samples: streams opened by data.remote, then
    webdataset's own tar parsing and key grouping."""
    from webdataset import tariterators

    from dataperf.data.remote import url_opener

    return [url_opener, tariterators.tar_file_expander, tariterators.group_by_keys]


def collate_for(data: Data, ds: Any, default: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    """A user's Dataset is batched by its own collate_fn attribute (or torch's default), then labelled."""
    from dataperf.data.user import UserCollate

    if data.format == "user-dataset":
        return UserCollate(getattr(ds, "collate_fn", None))
    return default

