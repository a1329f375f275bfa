"""Parquet that holds images (Hugging Face `datasets`' Image feature: a struct of `bytes` and `path` per row,
beside a `label`), read in place as image data rather than as text for the tokenizer. The columns are found
from the schema (or named with DATA#image=COL,label=COL); samples are counted from the footers, and the row
groups are the units a loader deals out to its workers, as WebDataset deals shards."""

from __future__ import annotations

from pathlib import Path

from dataperf.data.spec import Data, DataFile
from dataperf.errors import UserError

IMAGE_NAMES = ("image", "img", "jpg", "jpeg", "png", "webp", "picture", "pixel_values_bytes")
LABEL_NAMES = ("label", "labels", "cls", "class", "target", "fine_label")


def _pq():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("reading Parquet needs pyarrow, which is not installed: pip install pyarrow") from None
    return pq


def image_columns(path: Path, options: dict[str, str]) -> tuple[str, str | None] | None:
    """The image column (a struct with a binary `bytes` field, or a binary column with an image's name) and the
    label column (an integer column with a label's name), or None when the file holds no images."""
    import pyarrow as pa

    try:
        schema = _pq().read_schema(path)
    except (pa.ArrowInvalid, OSError):
        return None  # not Parquet: the text reader says so in its own words
    return columns_of(schema, path, options)


def columns_of(schema, path: Path, options: dict[str, str]) -> tuple[str, str | None] | None:
    """image_columns on a schema already read (a file's footer is read once)."""
    import pyarrow as pa

    names = schema.names

    def is_image(f: pa.Field) -> bool:
        if pa.types.is_struct(f.type):
            return any(c.name == "bytes" and pa.types.is_binary(c.type) for c in f.type)
        return (pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)) and f.name.lower() in IMAGE_NAMES

    image = options.get("image")
    if image is not None and image not in names:
        raise UserError(f"{path} has no column {image!r} (DATA#image=); its columns: {names}")
    image = image or next((f.name for f in schema if is_image(f)), None)
    if image is None:
        return None
    label = options.get("label")
    if label is not None and label not in names:
        raise UserError(f"{path} has no column {label!r} (DATA#label=); its columns: {names}")
    label = label or next((f.name for f in schema if f.name.lower() in LABEL_NAMES and pa.types.is_integer(f.type)),
                          None)
    return image, label


def resolve(spec: str, files: list[tuple[Path, int, int]], root: Path, columns: tuple[str, str | None],
            options: dict[str, str]) -> Data:
    """Image Parquet as Data: every file's row groups and rows from its footer (no data read)."""
    pq = _pq()
    groups: list[list[int]] = []
    for p, _, _ in files:
        pf = pq.ParquetFile(p)
        meta = pf.metadata
        if columns_of(pf.schema_arrow, p, options) != columns:
            raise UserError(f"{p} does not hold the columns of {files[0][0].name} ({columns[0]!r}, {columns[1]!r}); "
                            "point DATA at files of one dataset")
        groups.append([meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    image, label = columns
    d = Data(spec=spec, location=str(root), kind="image", format="hf-parquet",
             files=[DataFile(str(p), size) for p, size, _ in files], count=sum(map(sum, groups)),
             options={**options, "image": image, **({"label": label} if label else {})}, row_groups=groups)
    if not label:
        d.notes.append(f"no integer label column found beside {image!r}: every sample is labelled 0 "
                       "(name one with DATA#label=COL)")
    return d
