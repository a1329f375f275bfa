"""Tiny generated datasets shared by the tests (made once per session: generation is the slow part)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from dataperf.data.make.generate import ImageSpec, TokenSpec, write_dataset


@pytest.fixture(scope="session", autouse=True)
def ray_workers_at_normal_priority():
    """Ray's workers at nice 0 in every Ray the tests start (Ray's own default is 15, which dataperf keeps for
    users): beside a loaded box's other processes (CI's two cores busy) nice-15 workers got a few % of a core and
    a paced map stalled past the 120-s watchdog. The known answers are paced on deadlines, so priority only decides
    whether foreign load can starve them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_worker_niceness", "0")
        yield


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


@contextlib.contextmanager
def held_elsewhere(path: Path) -> Iterator[int]:
    """`path`'s --out lock held by another process (results.exclusive) while the block runs; yields its pid."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1]))
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from dataperf import results\n"
                               "with results.exclusive(sys.argv[1]):\n print('held', flush=True); sys.stdin.read()",
                               str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()
        holder.stdin.close()


@pytest.fixture(autouse=True)
def signal_handlers_restored():
    """Each test leaves SIGINT and SIGTERM as it found them: litdata's optimize() installs a SIGINT handler that
    calls os._exit(0) and keeps it, and a later test's Ctrl-C then ended the whole run with exit 0, a quarter of
    the suite never run."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, handler in saved.items():
        if signal.getsignal(s) is not handler:
            signal.signal(s, handler)


@pytest.fixture(autouse=True)
def answers_never_contradict(monkeypatch):
    """Every answer a test prints (`_render.print_recommendation`: sweep, report, tune) is read as a user reads
    it and the test fails on a contradiction (tests/answers.py): INPUT-BOUND beside the model binding, 'feeds'
    beside a wait over 5%, advice for a limit that does not bind, a GPU named where the step ran on the CPU."""
    from dataperf.commands import _render
    from tests.answers import contradictions

    real, printed = _render.print_recommendation, []

    def checked(rec):
        console = _render.console
        with console.capture() as cap:
            real(rec)
        text = cap.get()
        console.file.write(text)
        cuda = str(rec.step.device).startswith("cuda") if rec.step is not None else None
        printed.append((text, cuda))

    monkeypatch.setattr(_render, "print_recommendation", checked)
    yield
    bad = [(c, text) for text, cuda in printed for c in contradictions(text, cuda)]
    assert not bad, f"an answer contradicts itself: {bad[0][0]}\n{bad[0][1]}"


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


# --- data in the forms users already have (tests/data, tests/backends): an ImageFolder tree, WebDataset shards
# written with webdataset's own TarWriter, token .bin/.npy/.jsonl files, and a Dataset factory module

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
import numpy as np
import torch
from PIL import Image
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
