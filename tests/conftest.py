"""Tiny generated datasets shared by the tests (made once per session: generation is the slow part)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from dataperf.data.make.generate import ImageSpec, TokenSpec, write_dataset


@pytest.fixture(scope="session", autouse=True)
def private_cache_dir(tmp_path_factory):
    """dataperf's cache (scan facts, converted stores of read-only datasets) under the session's tmp, not ~."""
    old = os.environ.get("DATAPERF_CACHE_DIR")
    os.environ["DATAPERF_CACHE_DIR"] = str(tmp_path_factory.mktemp("dataperf-cache"))
    yield
    if old is None:
        os.environ.pop("DATAPERF_CACHE_DIR", None)
    else:
        os.environ["DATAPERF_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def datasets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data")
    out = {}
    img, tok = ImageSpec(64, 64, 85), TokenSpec(median_len=64, sigma=0.9, max_len=1024)
    for kind in ("image", "tokens"):
        for fmt in ("files", "webdataset"):
            p = root / f"{kind}-{fmt}"
            write_dataset(p, kind, fmt, 96, seed=1, image=img, tokens=tok, shard_mb=0.05)
            out[f"{kind}-{fmt}"] = p
    return out


@pytest.fixture
def one_thread():
    """One intra-op thread: with two, the tiny step's OpenMP barriers spin against loaded cores and add tens
    of ms of CPU time to the 50 ms sleep, so the step would no longer have a known length."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
