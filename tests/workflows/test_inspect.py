"""`shards inspect` on every DATA bench reads (issue 29): shards by brace pattern and over HTTP, token streams and
text files, and image Parquet, each counted as bench reads it, with --verify listing every bad sample."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data.manifest import read_manifest
from dataperf.errors import UserError
from dataperf.workflows.inspect_data import inspect_spec
from tests.conftest import jpeg
from tests.data.servers import HttpServer


def test_shards_by_brace_pattern_and_over_http(datasets, tmp_path):
    src = datasets["tokens-webdataset"]
    m = read_manifest(src)
    shards = sorted(p.name for p in src.glob("*.tar"))
    first, last = shards[0].split("-")[1].split(".")[0], shards[-1].split("-")[1].split(".")[0]
    brace = f"{src}/shard-{{{first}..{last}}}.tar"
    ins = inspect_spec(brace)
    assert (ins.count, ins.shard_count, ins.token_lengths) == (m.count, len(shards), m.token_lengths)
    with HttpServer(src) as srv:
        ins = inspect_spec(f"{srv.url}/shard-{{{first}..{last}}}.tar")
    assert (ins.count, ins.token_lengths) == (m.count, m.token_lengths)


def test_verify_names_a_damaged_image_in_shards_given_by_a_glob(datasets, tmp_path):
    d = tmp_path / "bad"
    shutil.copytree(datasets["image-webdataset"], d)
    (d / "manifest.json").unlink()
    shard = sorted(d.glob("*.tar"))[0]
    raw = shard.read_bytes()
    at = raw.index(b"\xff\xd8\xff")  # the first JPEG's bytes: damage its header
    shard.write_bytes(raw[:at] + b"\0" * 64 + raw[at + 64:])
    truncated = sorted(d.glob("*.tar"))[-1]
    truncated.write_bytes(truncated.read_bytes()[:1500] + b"\x17" * 700)  # not a tar past its first member
    with pytest.raises(UserError, match=f"corrupt or unreadable tar shard .*{truncated.name}"):
        inspect_spec(str(d / "*.tar"))
    truncated.unlink()
    n = inspect_spec(str(d / "*.tar")).count  # sized, not decoded: the damaged image is found by --verify
    ins = inspect_spec(str(d / "*.tar"), verify=True)
    assert len(ins.corrupt) == 1 and ins.corrupt[0].startswith(shard.name), ins.corrupt
    assert ins.count == n - 1


def test_token_streams_and_text_are_counted_as_bench_reads_them(tmp_path):
    np.arange(5000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    ins = inspect_spec(str(tmp_path / "t.bin"))
    assert ins.count == 5000 // 512 and set(ins.token_lengths) == {512} and ins.kind == "tokens"
    texts = [f"line {i} " * (i % 9 + 1) for i in range(120)]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    ins = inspect_spec(f"{tmp_path / 't.jsonl'}#tokenizer=bytes")
    assert ins.count == 120 and ins.token_lengths == [len(t.encode()) for t in texts]


def test_image_parquet_verify_names_the_row_that_does_not_decode(tmp_path):
    rng = np.random.default_rng(0)
    images = [{"bytes": jpeg(rng, 40, 30), "path": f"img{i}.jpg"} for i in range(12)]
    images[7] = {"bytes": b"not a jpeg", "path": "img7.jpg"}
    (tmp_path / "hf").mkdir()
    pq.write_table(pa.table({"image": images, "label": list(range(12))}), tmp_path / "hf" / "train.parquet",
                   row_group_size=4)
    r = CliRunner().invoke(cli, ["shards", "inspect", "--verify", str(tmp_path / "hf" / "train.parquet")])
    assert r.exit_code == 2 and r.output.count("error:") == 1, r.output
    assert "corrupt: row 3 of row group 1 of" in r.output and "1 corrupt sample(s)" in r.output, r.output
    ins = inspect_spec(str(tmp_path / "hf" / "train.parquet"))  # without --verify: sized, not decoded
    assert ins.count == 12 and ins.kind == "image" and not ins.corrupt


def _bench_count(data) -> str:
    """The `data:` line bench prints for DATA: its resolution's summary."""
    from dataperf.data import resolve

    return f"data: {resolve(str(data)).summary()}"


def test_inspect_reads_a_folder_as_bench_does(tmp_path):
    """One reading of DATA (issue 53): an ImageFolder parent with train/ and val/ is its 12 training images
    (the review saw val/ counted in), and the folders bench reads that inspect refused (HF Parquet, nanoGPT's
    train.bin/val.bin, LitData) are counted; each with bench's own `data:` line."""
    from PIL import Image

    root = tmp_path / "imagenet"
    for split, n in (("train", 6), ("val", 2)):
        for c in ("n01", "n02"):
            (root / split / c).mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (20, 16)).save(root / split / c / f"{c}_{i}.JPEG", "JPEG")
    rng = np.random.default_rng(0)
    (tmp_path / "hf" / "data").mkdir(parents=True)
    pq.write_table(pa.table({"image": [{"bytes": jpeg(rng, 20, 16), "path": f"{i}.jpg"} for i in range(10)],
                             "label": list(range(10))}), tmp_path / "hf" / "data" / "train-00000-of-00001.parquet")
    (tmp_path / "nanogpt").mkdir()
    np.memmap(tmp_path / "nanogpt" / "train.bin", np.uint16, "w+", shape=(4096,))[:] = 7
    np.memmap(tmp_path / "nanogpt" / "val.bin", np.uint16, "w+", shape=(1024,))[:] = 7
    for data, count in ((root, 12), (tmp_path / "hf" / "data", 10), (tmp_path / "nanogpt", 8)):
        r = CliRunner().invoke(cli, ["shards", "inspect", str(data)])
        assert r.exit_code == 0, r.output
        assert r.output.splitlines()[0] == _bench_count(data), r.output
        assert inspect_spec(str(data)).count == count
    assert "left out: val/ (another split)" in _bench_count(root)
    r = CliRunner().invoke(cli, ["shards", "inspect", "--verify", str(root)])
    assert r.exit_code == 0 and "verified: 12 samples decoded, 0 bad" in r.output, r.output


def test_inspect_counts_a_litdata_folder(tmp_path):
    litdata = pytest.importorskip("litdata", reason="litdata not installed")
    from PIL import Image

    litdata.optimize(fn=lambda i: {"image": Image.new("RGB", (20, 16)), "class": i % 3}, inputs=list(range(9)),
                     output_dir=str(tmp_path / "lit"), chunk_bytes="64KB", num_workers=1, start_method="fork")
    r = CliRunner().invoke(cli, ["shards", "inspect", str(tmp_path / "lit")])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("data: 9 images from lit/; image: 9 images its reader decodes")
    assert inspect_spec(str(tmp_path / "lit")).count == 9
