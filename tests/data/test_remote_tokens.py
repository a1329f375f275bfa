"""Token files over http(s):// and s3://: .bin windows by Range requests at the same seeded offsets as the
local memmap, .npy rows and streams, JSONL streamed and Parquet read by ranges, all read back equal to the
local files; a dead server, a 404 or a server that ignores Range is one `error:` line before measuring."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data import resolve, tokens
from dataperf.errors import UserError
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig
from tests.data.servers import HttpServer

SEQ = 32


@pytest.fixture(scope="module")
def token_dir(user_data, tmp_path_factory):
    """The user's token files in one served folder: a uint16 .bin, a 2-d and a 1-d .npy, JSONL, Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("served")
    (d / "train.bin").write_bytes(user_data["bin"].read_bytes())
    (d / "rows.npy").write_bytes(user_data["npy"].read_bytes())
    np.save(d / "stream.npy", np.random.default_rng(3).integers(0, 5000, 40 * SEQ, dtype=np.int32))
    (d / "text.jsonl").write_bytes(user_data["jsonl"].read_bytes())
    texts = [json.loads(line)["text"] for line in user_data["jsonl"].read_text().splitlines()]
    pq.write_table(pa.table({"text": texts}), d / "text.parquet", row_group_size=16)
    return d


@pytest.fixture(scope="module")
def http(token_dir):
    with HttpServer(token_dir) as srv:
        yield srv


def cfg(**kw) -> LoaderConfig:
    return LoaderConfig(**{"backend": "tokens-bin", "batch_size": 4, "decode": True, "seq_len": SEQ, **kw})


def windows(spec: str, fmt: str) -> list[np.ndarray]:
    ds = tokens.WindowDataset(resolve(spec), cfg(backend=fmt), seed=7)
    return [ds[i]["x"].numpy() for i in range(len(ds))]


@pytest.mark.parametrize("name, fmt", [("train.bin", "tokens-bin"), ("rows.npy", "npy"), ("stream.npy", "npy")])
def test_http_windows_equal_the_local_files(http, token_dir, name, fmt):
    """Same seed, same windows: the remote reader places them at the local memmap's random offsets, and each
    one is a single Range request of exactly one window."""
    remote, local = windows(f"{http.url}/{name}", fmt), windows(str(token_dir / name), fmt)
    assert len(remote) == len(local) > 10
    assert all(np.array_equal(a, b) for a, b in zip(remote, local, strict=True))
    got = [(a, b) for _, p, a, b in http.log if p == f"/{name}" and a is not None]
    width = {"train.bin": SEQ * 2, "rows.npy": 32 * 4, "stream.npy": SEQ * 4}[name]
    reads = [b - a + 1 for a, b in got]
    assert reads.count(width) >= len(remote)


def test_http_bin_offsets_are_seeded_random(http):
    """Two seeds give different window offsets, each a whole token apart; one seed gives the same twice."""
    data = resolve(f"{http.url}/train.bin")
    idx = {s: tokens.WindowDataset(data, cfg(), seed=s).index for s in (1, 1, 2)}
    assert idx[1] != idx[2] and len({o for _, o in idx[1]}) > len(idx[1]) // 2


@pytest.mark.parametrize("name, fmt", [("text.jsonl", "jsonl"), ("text.parquet", "parquet")])
def test_http_text_equals_the_local_file(http, token_dir, name, fmt):
    def texts(spec):
        d = resolve(spec + "#tokenizer=bytes")
        return [t for f in d.files for t in tokens.iter_texts(d, f)]

    assert texts(f"{http.url}/{name}") == texts(str(token_dir / name))
    if fmt == "parquet":  # footer then row groups, by ranges, never the whole file in one GET
        assert all(a is not None for m, p, a, _ in http.log if p == f"/{name}" and m == "GET")


@pytest.mark.slow
@pytest.mark.parametrize("name, fmt, rows", [("train.bin", "tokens-bin", 48), ("rows.npy", "npy", 48),
                                             ("text.jsonl", "jsonl", 48), ("text.parquet", "parquet", 48)])
def test_bench_over_http_with_workers(http, tmp_path, monkeypatch, name, fmt, rows):
    """The real CLI, two DataLoader workers each opening its own connections; a remote trial's cache mode."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(cli, ["bench", f"{http.url}/{name}#tokenizer=bytes" if fmt in ("jsonl", "parquet")
                                 else f"{http.url}/{name}", "--decode", "--seq-len", str(SEQ), "--batch-size", "4",
                                 "--num-workers", "2", "--max-batches", "6", "--no-collect", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rec = json.loads(out.read_text().splitlines()[-1])
    assert rec["status"] == "ok" and rec["cache_mode"] == "remote" and rec["samples_per_repeat"] >= 6 * 4


@pytest.mark.slow
def test_every_token_format_over_s3_reads_as_the_local_file(token_dir, s3_server):
    """moto's S3 server on 127.0.0.1: every token format resolves, reads equal to the local file, and bench runs."""
    s3_server.create_bucket(Bucket="tok")
    for p in token_dir.iterdir():
        s3_server.upload_file(str(p), "tok", f"t/{p.name}")
    assert np.array_equal(np.stack(windows("s3://tok/t/train.bin", "tokens-bin")),
                          np.stack(windows(str(token_dir / "train.bin"), "tokens-bin")))
    assert resolve("s3://tok/t/rows.npy").count == 48
    for name in ("text.jsonl", "text.parquet"):
        d = resolve(f"s3://tok/t/{name}#tokenizer=bytes")
        assert len([t for f in d.files for t in tokens.iter_texts(d, f)]) == 48
    for name, fmt in (("train.bin", "tokens-bin"), ("text.parquet", "parquet")):
        spec = f"s3://tok/t/{name}" + ("#tokenizer=bytes" if fmt == "parquet" else "")
        res = run_trial(resolve(spec), cfg(backend=fmt), TrialOptions(collect=False, max_batches=5))
        assert res.status == "ok" and res.cache_mode == "remote", res.error
    with pytest.raises(UserError, match="does not exist"):
        resolve("s3://tok/t/missing.bin")


@pytest.mark.parametrize("suffix, words", [
    ("/train.bin", "cannot fetch"), ("/missing.npy", "HTTP 404"), ("/missing.parquet", "HTTP 404"),
])
def test_dead_server_or_404_is_one_error_line(http, suffix, words):
    base = "http://127.0.0.1:9" if words == "cannot fetch" else http.url  # nothing listens on port 9
    r = CliRunner().invoke(cli, ["bench", base + suffix, "--seq-len", str(SEQ)])
    assert r.exit_code == 2 and r.output.startswith("error:") and words in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("name, ok", [("train.bin", False), ("rows.npy", False), ("text.parquet", False),
                                      ("text.jsonl", True)])
def test_server_without_range_support(token_dir, name, ok):
    """Windows and Parquet need byte ranges: a server that answers 200 with the whole file is refused before
    measuring; JSONL is streamed and needs none."""
    with HttpServer(token_dir, ranges=False) as srv:
        spec = f"{srv.url}/{name}" + ("#tokenizer=bytes" if name.startswith("text") else "")
        if ok:
            assert resolve(spec).format == "jsonl"
            return
        r = CliRunner().invoke(cli, ["bench", spec, "--seq-len", str(SEQ)])
    assert r.exit_code == 2 and r.output.startswith("error:") and "Range" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_server_that_dies_during_the_range_probe_is_not_told_to_serve_ranges(token_dir):
    """HEAD answers, then the 1-byte Range GET gets its 206 status and no body before the connection closes:
    the error says the server stopped answering, not that it lacks Range support."""
    import http.server
    import threading

    size = (token_dir / "train.bin").stat().st_size

    class Dies(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self):
            self.send_response(206)
            self.send_header("Content-Length", "1")
            self.end_headers()
            self.close_connection = True  # no body: the client's read ends early

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Dies)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = CliRunner().invoke(cli, ["bench", f"http://127.0.0.1:{srv.server_address[1]}/train.bin",
                                     "--seq-len", str(SEQ)])
    finally:
        srv.shutdown()
        srv.server_close()
    assert r.exit_code == 2 and r.output.startswith("error:") and "stopped answering" in r.output, r.output
    assert "serve it from a server that answers" not in r.output and len(r.output.strip().splitlines()) == 1


def test_a_remote_jsonl_whose_server_answers_500_names_the_url_not_parquet(token_dir, monkeypatch):
    """The review's case: HEAD answers, every GET is a 500. The line named no URL and blamed Parquet; now it names
    the URL and the server's answer, after the retries."""
    monkeypatch.setattr("dataperf.data.remote.BACKOFF_S", 0.0)
    with HttpServer(token_dir, fail_every=1) as srv:
        url = f"{srv.url}/text.jsonl"
        r = CliRunner().invoke(cli, ["bench", url + "#tokenizer=bytes", "--seq-len", str(SEQ)])
        gets = sum(m == "GET" for m, *_ in srv.log)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert r.output.startswith(f"error: cannot fetch {url}: HTTP 500") and "Parquet" not in r.output, r.output
    assert gets == 4 and "tried 4 times" in r.output  # the first GET and 3 retries


@pytest.mark.parametrize("name, fmt", [("text.jsonl", "jsonl"), ("train.bin", "tokens-bin")])
def test_a_server_failing_every_third_get_is_retried_and_reads_what_the_local_file_holds(token_dir, name, fmt,
                                                                                           monkeypatch):
    """One transient 500 in three GETs (streamed JSONL, ranged .bin windows) failed the trial; each is retried
    with back-off, and what is read equals the local file."""
    monkeypatch.setattr("dataperf.data.remote.BACKOFF_S", 0.0)
    with HttpServer(token_dir, fail_every=3) as srv:
        if fmt == "jsonl":
            d = resolve(f"{srv.url}/{name}#tokenizer=bytes")
            local = resolve(f"{token_dir / name}#tokenizer=bytes")
            got = [[t for f in x.files for t in tokens.iter_texts(x, f)] for x in (d, d, local)]
            assert got[0] == got[1] == got[2]
        else:
            remote, local = windows(f"{srv.url}/{name}", fmt), windows(str(token_dir / name), fmt)
            assert all(np.array_equal(a, b) for a, b in zip(remote, local, strict=True)) and len(remote) > 10
        assert sum(m == "GET" for m, *_ in srv.log) >= 3  # so at least one GET was answered 500
