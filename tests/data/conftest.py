"""Data in the forms users already have: an ImageFolder tree, WebDataset shards written with webdataset's own
TarWriter, token .bin/.npy/.jsonl files, and a Dataset factory module. Small, real files."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def jpeg(rng: np.random.Generator, w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


@pytest.fixture(scope="session")
def user_data(tmp_path_factory) -> dict[str, Path]:
    import webdataset as wds

    root = tmp_path_factory.mktemp("user")
    rng = np.random.default_rng(0)
    out: dict[str, Path] = {}
    folder = root / "imagefolder"
    for c in ("cat", "dog"):
        (folder / c).mkdir(parents=True)
        for i in range(24):
            (folder / c / f"{i}.jpg").write_bytes(jpeg(rng, 40 + i, 32))
    out["imagefolder"] = folder
    shards = root / "shards"
    shards.mkdir()
    for s in range(3):
        with wds.TarWriter(str(shards / f"train-{s:04d}.tar")) as w:
            for i in range(16):
                w.write({"__key__": f"{s}_{i}", "jpg": jpeg(rng, 36, 30), "cls": str(i % 3)})
    out["shards"] = shards
    tok = root / "tokens"
    tok.mkdir()
    rng.integers(0, 1000, 48 * 64, dtype=np.uint16).tofile(tok / "train.bin")
    out["bin"] = tok / "train.bin"
    np.save(root / "rows.npy", rng.integers(0, 1000, (48, 32), dtype=np.int32))
    out["npy"] = root / "rows.npy"
    with open(root / "text.jsonl", "w") as f:
        for i in range(48):
            f.write(json.dumps({"text": "the quick brown fox " * (1 + i % 5)}) + "\n")
    out["jsonl"] = root / "text.jsonl"
    mod = root / "mods"
    mod.mkdir()
    (mod / "userds.py").write_text('''
import torch
from torch.utils.data import Dataset

class Squares(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.full((3, 16, 16), float(i % 7)), i % 10

def build():
    return Squares()
''')
    sys.path.insert(0, str(mod))
    out["mods"] = mod
    return out


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3-compatible server on 127.0.0.1, with the AWS variables pointing dataperf (fsspec/s3fs, the
    dataperf[s3] extra) at it; yields a boto3 client for putting objects there."""
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    srv.start()
    host, port = srv.get_host_and_port()
    url = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                     "AWS_DEFAULT_REGION": "us-east-1"}.items():
            mp.setenv(k, v)
        yield boto3.client("s3", endpoint_url=url)
    srv.stop()
