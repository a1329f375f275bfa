"""Token files users really have, good and bad: a Megatron .bin with its .idx read at the dtype the .idx
declares, and bad files (empty, not the format their name says, a bad line) each one `error:` line naming the
file, exit 2, never "a dataperf bug" nor "interrupted"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data import resolve, tokens
from dataperf.errors import UserError
from dataperf.results import LoaderConfig

FAST = ["--batch-size", "4", "--repeats", "1", "--min-batches", "2", "--warmup-batches", "0", "--no-collect",
        "--max-batches", "3"]


def one_error(r, *needles: str) -> str:
    """The contract for bad data: exit 2, one `error:` line holding every needle, no bug report, no traceback."""
    assert r.exit_code == 2, r.output
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "Traceback" not in r.output, r.output
    assert "dataperf bug" not in errs[0] and "interrupted" not in r.output, r.output
    for n in needles:
        assert n in errs[0], errs[0]
    return errs[0]


def megatron(tmp_path: Path, tokens_u8: np.ndarray, header: bytes) -> Path:
    """A .bin of uint8 tokens and an .idx beside it starting with `header`."""
    tokens_u8.tofile(tmp_path / "m.bin")
    (tmp_path / "m.idx").write_bytes(header + b"\0" * 32)
    return tmp_path / "m.bin"


def idx_header(code: int, version: int = 1) -> bytes:
    return tokens.MEGATRON_MAGIC + version.to_bytes(8, "little") + bytes([code])


def test_megatron_uint8_tokens_are_read_as_uint8(tmp_path):
    """Megatron's dtype code 1 (uint8): each window holds the file's bytes as ids, not pairs of them."""
    ids = np.random.default_rng(0).integers(0, 250, 64 * 16, dtype=np.uint8)
    data = resolve(str(megatron(tmp_path, ids, idx_header(1))))
    ds = tokens.WindowDataset(data, LoaderConfig(backend="tokens-bin", batch_size=4, decode=True, seq_len=16,
                                                 shuffle=False))
    assert len(ds) == 64
    assert np.array_equal(ds[3]["x"].numpy(), ids[48:64])


@pytest.mark.parametrize("header, needles", [
    (idx_header(6), ("m.idx", "float64", "code 6")),
    (idx_header(7), ("m.idx", "float32", "code 7")),
    (idx_header(0), ("m.idx", "damaged header", "dtype code 0")),
    (idx_header(4, version=99), ("m.idx", "damaged header", "version 99")),
    (tokens.MEGATRON_MAGIC + b"garbage", ("m.idx", "damaged header")),
], ids=["float64", "float32", "code-0", "version-99", "garbage"])
def test_megatron_idx_with_an_unreadable_dtype_is_one_error_line(tmp_path, header, needles):
    ids = np.random.default_rng(0).integers(0, 250, 64 * 16, dtype=np.uint8)
    r = CliRunner().invoke(cli, ["bench", str(megatron(tmp_path, ids, header)), "--seq-len", "16", *FAST])
    one_error(r, *needles)


def test_an_idx_without_megatron_magic_is_noted_in_the_record(tmp_path):
    ids = np.random.default_rng(0).integers(0, 250, 64 * 16, dtype=np.uint8)
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(cli, ["bench", str(megatron(tmp_path, ids, b"TNTIDX\0\0")), "--seq-len", "16",
                                 "--out", str(out), *FAST])
    assert r.exit_code == 0, r.output
    notes = json.loads(out.read_text().splitlines()[-1])["notes"]
    assert any("m.idx is not a Megatron index" in n and "read as uint16" in n for n in notes), notes
    assert "note: " in r.output and "not a Megatron index" in r.output


def test_an_empty_npy_is_named_not_taken_for_ctrl_c(tmp_path):
    (tmp_path / "e.npy").write_bytes(b"")
    one_error(CliRunner().invoke(cli, ["bench", str(tmp_path / "e.npy"), *FAST]), "e.npy is empty", "not a .npy file")


def jsonl(path: Path, bad: str, at: int, n: int = 300) -> Path:
    """n good lines of text with `bad` as line `at` (1-based)."""
    lines = [json.dumps({"text": f"hello {i}"}) for i in range(n)]
    lines.insert(at - 1, bad)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("name, make, workers, needles", [
    ("e.bin", lambda p: p.write_bytes(b""), 0, ("e.bin is empty",)),
    ("f.parquet", lambda p: p.write_bytes(b"PAR1\0\0\0\0"), 0, ("f.parquet is not a Parquet file",)),
    ("e.parquet", lambda p: p.write_bytes(b""), 0, ("e.parquet is not a Parquet file",)),
    ("b.jsonl", lambda p: jsonl(p, "{bad", 1), 0, ("b.jsonl line 1 is not JSON", "column 2")),
    ("b.jsonl", lambda p: jsonl(p, "{bad", 5), 0, ("b.jsonl line 5 is not JSON",)),
    ("b.jsonl", lambda p: jsonl(p, "{bad", 5), 1, ("b.jsonl line 5 is not JSON",)),
    ("l.jsonl", lambda p: jsonl(p, "[1, 2]", 5), 0, ("l.jsonl line 5 is a JSON list",)),
], ids=["empty-bin", "not-parquet", "empty-parquet", "jsonl-line-1", "jsonl-line-5", "jsonl-line-5-worker",
        "jsonl-list"])
def test_bad_token_and_text_files_are_named(tmp_path, name, make, workers, needles):
    """Found before measuring where the first read shows it; a later bad line fails the trial, naming its line."""
    make(tmp_path / name)
    spec = f"{tmp_path / name}#tokenizer=bytes" if name.endswith(("jsonl", "parquet")) else str(tmp_path / name)
    r = CliRunner().invoke(cli, ["bench", spec, "--decode", "--num-workers", str(workers), *FAST])
    one_error(r, *needles)


def test_an_unknown_tokenizer_is_one_error_line(tmp_path):
    path = jsonl(tmp_path / "t.jsonl", json.dumps({"text": "x"}), 1)
    with pytest.raises(UserError) as e:
        resolve(f"{path}#tokenizer=nosuch")
    assert "\n" not in str(e.value) and "'nosuch'" in str(e.value)
    r = CliRunner().invoke(cli, ["bench", f"{path}#tokenizer=nosuch", "--decode", *FAST])
    assert len(r.output.splitlines()) == 1
    one_error(r, "tiktoken cannot load encoding 'nosuch'")


@pytest.mark.parametrize("decode", [False, True])
def test_a_token_stream_counts_its_windows_tokens(tmp_path, decode):
    """tokens/s is samples/s x the real tokens a sample: a .bin cut into 64-token windows has 64 a sample, raw
    bytes or decoded, and bench prints tokens/s for it."""
    np.arange(20_000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(cli, ["bench", str(tmp_path / "t.bin"), "--seq-len", "64", *FAST, "--out", str(out),
                                 "--decode" if decode else "--no-decode"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text().splitlines()[-1])["tokens_per_sample"] == 64
    assert "tokens/s" in r.output
