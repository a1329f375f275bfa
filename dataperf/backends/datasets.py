"""torch Datasets for the DATA forms the files/webdataset backends in backends/dataloader.py do not cover:
token files, image Parquet, the user's own Dataset, and the stages that read WebDataset shards over the
network."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import IterableDataset, get_worker_info

from dataperf.data import Data
from dataperf.errors import TrialError


def make_source_dataset(data: Data, cfg: Any, rank: int = 0, world_size: int = 1, seed: int = 0):
    if cfg.backend != data.format:
        raise TrialError(f"backend {cfg.backend} asked for, but {data.spec} holds {data.format}; "
                         "use --backend auto")
    if data.format == "user-dataset":
        from dataperf.data.user import build_dataset

        return build_dataset(data.factory or "")
    if data.format == "hf-parquet":
        return ParquetImages(data, cfg, rank, world_size, seed)
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


class ParquetImages(IterableDataset):
    """Image Parquet (data/hfparquet.py): the row groups are dealt out to ranks and workers as WebDataset deals
    shards (in a new order each epoch when shuffled, and the rows of a group shuffled too), each read with only
    its image and label columns, and every row decoded as an image file would be."""

    def __init__(self, data: Data, cfg: Any, rank: int = 0, world_size: int = 1, seed: int = 0):
        from dataperf.backends.dataloader import SampleDecoder

        self.files = [f.path for f in data.files]
        self.units = [(fi, gi) for fi, groups in enumerate(data.row_groups) for gi in range(len(groups))]
        self.image, self.label = data.options["image"], data.options.get("label")
        self.decoder, self.shuffle = SampleDecoder(cfg), cfg.shuffle
        self.rank, self.world_size, self.seed, self.epoch = rank, world_size, seed, 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import pyarrow.parquet as pq

        wi = get_worker_info()
        n_workers, wid = (wi.num_workers, wi.id) if wi else (1, 0)
        rng = random.Random(self.seed * 1_000_003 + self.epoch)
        self.epoch += 1  # persistent workers keep this object: the next epoch gets a new order
        units = list(self.units)
        if self.shuffle:
            rng.shuffle(units)
        columns = [self.image] + ([self.label] if self.label else [])
        opened: dict[int, Any] = {}
        for fi, gi in units[self.rank * n_workers + wid::self.world_size * n_workers]:
            pf = opened.setdefault(fi, pq.ParquetFile(self.files[fi]))
            table = pf.read_row_group(gi, columns=columns)
            images = table.column(self.image).to_pylist()
            labels = table.column(self.label).to_pylist() if self.label else [0] * len(images)
            rows = list(range(len(images)))
            if self.shuffle:
                rng.shuffle(rows)
            for r in rows:
                v = images[r]
                payload = v.get("bytes") if isinstance(v, dict) else v
                path = (v.get("path") if isinstance(v, dict) else None) or ""
                ext = path.rpartition(".")[2].lower() if "." in path else "jpg"
                yield self.decoder(ext, payload or b"", int(labels[r] or 0),
                                   f"row {r} of row group {gi} of {self.files[fi]}")
