"""Folders another loader's writer made (LitData optimize(), MosaicML MDSWriter): recognised by their index.json,
counted and described column by column from it, so that `data:` says what is read and how its images are
handled before anything is measured. The samples themselves are read through that loader's own reader."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from dataperf.data.spec import IMAGE_ENCODINGS, Data
from dataperf.errors import UserError


def loader_dataset(spec: str, root: Path) -> Data | None:
    """root read through the loader that wrote it (its samples measured as its reader gives them, as a user's
    Dataset's are) where that reader is installed; refused naming its install where not; None when root holds no
    such index.json."""
    index = root / "index.json"
    try:
        meta = json.loads(index.read_text()) if index.is_file() else None
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    if "chunks" in meta and "config" in meta:
        reader, what, install = "litdata", "a LitData optimize() output", "bash scripts/install_backends.sh litdata"
        count, columns = _litdata_columns(meta)
    elif "shards" in meta and any(isinstance(s, dict) and s.get("format") == "mds" for s in meta["shards"]):
        reader, what, install = "streaming", "a MosaicML MDS dataset", "bash scripts/streaming_env.sh (its own env)"
        count, columns = _mds_columns(meta)
    else:
        return None
    if importlib.util.find_spec(reader) is None:
        raise UserError(f"{root} is {what} (index.json + its chunk files), read through its own reader, which is "
                        f"not installed here: {install}; or point DATA at the data it was made from")
    images = any(e in IMAGE_ENCODINGS for e in columns.values())
    return Data(spec=spec, location=str(root), kind="image" if images else "unknown", format="user-dataset",
                count=count, options={"reader": reader}, columns=columns,
                notes=[f"{what}: read through {reader}.StreamingDataset, each sample as it gives it (its "
                       "deserialisation booked as transform)"])


def _litdata_columns(meta: dict) -> tuple[int | None, dict[str, str]]:
    """Samples (the chunks' sizes summed) and each column's serializer (data_format: 'pil', 'jpeg', 'bytes',
    ...), named by the sample dict's keys where its data_spec (a flattened pytree) gives them in leaf order."""
    config = meta.get("config") or {}
    formats = [str(f) for f in config.get("data_format") or []]
    names = [f"column {i}" for i in range(len(formats))]
    try:
        top = json.loads(config.get("data_spec") or "[]")[1]
        keys = json.loads(top["context"]) if top.get("type") == "builtins.dict" else None
        if isinstance(keys, list) and len(keys) == len(formats):
            names = [str(k) for k in keys]
    except (ValueError, TypeError, KeyError, IndexError):
        pass  # no names: the columns are said by position
    sizes = [c.get("chunk_size") for c in meta.get("chunks", []) if isinstance(c, dict)]
    count = sum(sizes) if sizes and all(isinstance(s, int) for s in sizes) else None
    return count, dict(zip(names, formats, strict=True))


def _mds_columns(meta: dict) -> tuple[int | None, dict[str, str]]:
    """Samples (the shards' counts summed) and each column's encoding, as the first shard declares them."""
    shards = [s for s in meta["shards"] if isinstance(s, dict)]
    counts = [s.get("samples") for s in shards]
    count = sum(counts) if counts and all(isinstance(c, int) for c in counts) else None
    first = shards[0] if shards else {}
    names, encodings = first.get("column_names") or [], first.get("column_encodings") or []
    return count, {str(n): str(e) for n, e in zip(names, encodings, strict=False)}
