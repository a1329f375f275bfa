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
