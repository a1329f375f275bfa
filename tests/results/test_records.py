import dataclasses
import json
import os
from pathlib import Path

import pytest

from dataperf import results
from dataperf.errors import UserError
from dataperf.results import DEFAULT_SHUFFLE_BUFFER, LoaderConfig, LoaderResult, StepResult, percentile, summarize
from tests.conftest import held_elsewhere


def test_round_trip_keeps_values_and_nan(tmp_path):
    p = tmp_path / "r.jsonl"
    results.append(p, LoaderResult(data="d", samples_per_s_median=12.5, samples_per_s_repeats=[12.0, 12.5, 13.0]))
    results.append(p, StepResult(model="m", step_ms_median=3.0))
    a, b = results.load(p)
    assert isinstance(a, LoaderResult) and a.samples_per_s_repeats == [12.0, 12.5, 13.0]
    assert a.payload_mib_s_median != a.payload_mib_s_median  # NaN written as null comes back as NaN
    assert isinstance(b, StepResult) and b.step_ms_median == 3.0
    line = json.loads(p.read_text().splitlines()[0])
    assert line["schema_version"] == results.SCHEMA_VERSION and line["payload_mib_s_median"] is None


def test_truncated_last_line_is_skipped(tmp_path):
    p = tmp_path / "r.jsonl"
    results.append(p, LoaderResult(data="d"))
    with open(p, "a") as f:
        f.write('{"kind": "loader", "sche')
    assert len(results.load(p)) == 1


def test_schema_mismatch_and_missing_file(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"kind": "loader", "schema_version": 999}) + "\n")
    with pytest.raises(UserError, match="schema_version"):
        results.load(p)
    with pytest.raises(UserError, match="not found"):
        results.load(tmp_path / "nope.jsonl")


def test_access_pattern_is_part_of_every_config():
    wds = LoaderConfig(backend="webdataset").explicit()
    assert wds.shuffle and wds.shuffle_buffer == DEFAULT_SHUFFLE_BUFFER  # the buffer that ran, written out
    assert LoaderConfig(backend="dali", shuffle_buffer=64).explicit().shuffle_buffer == 64
    assert LoaderConfig(backend="files", shuffle_buffer=64).explicit().shuffle_buffer is None  # a permutation
    assert LoaderConfig(backend="webdataset", shuffle=False, shuffle_buffer=64).explicit().shuffle_buffer is None
    assert wds.short() == f"webdataset bs=32 w=0 raw shuffled buf={DEFAULT_SHUFFLE_BUFFER} warm"
    assert LoaderConfig(num_workers=2).explicit().short() == "files bs=32 w=2 pf=2 raw shuffled warm"
    assert LoaderConfig(shuffle=False).short() == "files bs=32 w=0 raw sequential warm"
    assert LoaderConfig(decode=True).short() == "files bs=32 w=0 decode shuffled warm"  # the label says which
    assert LoaderConfig(backend="user-dataset").short() == "user-dataset bs=32 w=0 shuffled warm"  # its own code
    assert LoaderConfig().key() != LoaderConfig(shuffle=False).key()


def test_schema_2_loaders_read_in_storage_order_and_never_match_a_shuffled_trial(tmp_path):
    """Results written before shuffling was the default load as shuffle False, config_key recomputed, so
    --resume and compare never pair an old sequential trial with a new shuffled one."""
    cfg = {"format": "webdataset", "batch_size": 8, "num_workers": 2, "prefetch_factor": 2, "pin_memory": False,
           "persistent_workers": False, "decode": True, "cache": "warm", "image_size": 64, "cap_tokens": None}
    old_key = json.dumps({k: v for k, v in cfg.items() if v is not None}, sort_keys=True)
    now = {("backend" if k == "format" else k): v for k, v in cfg.items()}  # schema 4 names the backend
    p = tmp_path / "old.jsonl"
    lines = [{"kind": "loader", "schema_version": 2, "config": cfg, "config_key": old_key, "env": {},
              "samples_per_s_median": 100.0},
             {"kind": "e2e", "schema_version": 2, "config": cfg, "config_key": old_key, "env": {}},
             {"kind": "loader", "schema_version": 1, "config": cfg, "config_key": old_key},
             {"kind": "step", "schema_version": 2, "config_key": "cnn|cpu", "env": {}}]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    recs = results.load(p)
    sequential = LoaderConfig(**{**now, "shuffle": False})
    for r in recs[:3]:
        assert r.schema_version == results.SCHEMA_VERSION
        assert r.config["shuffle"] is False and r.config_key == sequential.key()
        assert r.config_key != LoaderConfig(**now).explicit().key()  # today's default: shuffled
    assert recs[0].samples_per_s_median == 100.0 and recs[3].config_key == "cnn|cpu"


def test_summary_and_percentile():
    s = summarize([10.0, 12.0, 11.0])
    assert s == {"median": 11.0, "min": 10.0, "max": 12.0, "spread_pct": pytest.approx(100 * 2 / 11)}
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile(list(range(101)), 99) == 99


# --- results files after a crash, a full disk, a second writer or damage ----------------------------------------

def _rec(i: int = 0):
    from dataperf.results import LoaderResult

    return LoaderResult(data="d", config_key=f"k{i}", samples_per_s_repeats=[1.0, 2.0])


def test_append_after_a_truncated_tail_cuts_it_instead_of_gluing(tmp_path):
    from dataperf import results

    p = tmp_path / "t.jsonl"
    results.append(p, _rec(0))
    results.append(p, _rec(1))
    os.truncate(p, p.stat().st_size - 30)  # crash mid-write of record 1
    results.append(p, _rec(2))
    got = results.load(p)
    assert [r.config_key for r in got] == ["k0", "k2"]
    assert p.read_bytes().endswith(b"\n") and p.read_bytes().count(b"\n") == 2


def test_a_full_disk_keeps_every_finished_record_and_the_file_valid(tmp_path):
    import subprocess

    from dataperf import results
    from dataperf.errors import UserError

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], check=True)
    try:
        p = d / "s.jsonl"
        n = 0
        with pytest.raises(UserError, match="cannot write results"):
            while True:
                results.append(p, _rec(n))
                n += 1
        assert len(results.load(p)) == n and p.read_bytes().endswith(b"\n")
    finally:
        subprocess.run(["umount", str(d)], check=False)


def test_a_short_write_of_a_record_is_cut_back(tmp_path, monkeypatch):
    import errno

    from dataperf import results
    from dataperf.errors import UserError

    p = tmp_path / "s.jsonl"
    results.append(p, _rec(0))
    size = p.stat().st_size
    real = os.write

    def eio(fd, data):
        if not data.startswith(b'{"'):  # anything but a record
            return real(fd, data)
        real(fd, data[:10])
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", eio)
    with pytest.raises(UserError, match="Input/output error"):
        results.append(p, _rec(1))
    assert p.stat().st_size == size and len(results.load(p)) == 1


@pytest.mark.slow
def test_report_and_compare_read_every_record_kind(tmp_path):
    """In a fresh process that imports only the cli: no kind depends on which modules were imported."""
    import subprocess
    import sys

    from dataperf import results

    p = tmp_path / "all.jsonl"
    for cls in results.RECORD_TYPES.values():
        results.append(p, cls())
    results.append(p, results.LimitsResult(  # a filled one: figures, NaN (not measured) and the binding limit
        data="d", config=dataclasses.asdict(results.LoaderConfig()), config_key=results.LoaderConfig().key(),
        decode_samples_per_s=120.0, decode_how="measured", h2d_how="n/a (no CUDA)", active_workers=2,
        binding_limit="decode", binding_samples_per_s=120.0, best_of_binding_pct=91.0))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    code = "from dataperf import results; import sys; print(sorted({r.kind for r in results.load(sys.argv[1])}))"
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == str(sorted(results.RECORD_TYPES)), out.stderr
    for args in (["report", str(p)], ["compare", str(p), str(p), "--metrics", "step_ms,data_stall_fraction"]):
        r = subprocess.run([sys.executable, "-m", "dataperf", *args], capture_output=True, text=True, env=env)
        assert "unknown record kind" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert r.returncode in (0, 2), r.stderr


def test_a_second_writer_gets_the_holders_pid_and_overwrite_cannot_delete(tmp_path, datasets):

    from click.testing import CliRunner

    from dataperf import results
    from dataperf.cli import cli

    out = tmp_path / "c.jsonl"
    results.append(out, _rec(0))
    with held_elsewhere(out) as holder_pid:
        for flag in ("--resume", "--overwrite"):
            r = CliRunner().invoke(cli, ["sweep", str(datasets["image-webdataset"]), "--num-workers", "0",
                                         "--batch-size", "8", "--no-collect", "--out", str(out), flag])
            assert r.exit_code == 2 and f"pid {holder_pid}" in r.output, r.output
        assert [x.config_key for x in results.load(out)] == ["k0"]
    results.append(out, _rec(1))  # released: writable again


@pytest.mark.parametrize("text,needle", [
    (b"", None), (b"garbage\n", "not valid JSON"), (b'[1,2,3]\n{"kind":"loader"}\n', "not a record"),
    (b"\xff\xfe x\n", "not UTF-8"),
])
def test_damaged_results_files_are_named(tmp_path, text, needle):
    from dataperf import results
    from dataperf.errors import UserError

    p = tmp_path / "r.jsonl"
    p.write_bytes(text)
    if needle is None:
        assert results.load(p) == []
        return
    with pytest.raises(UserError, match=needle):
        results.load(p)


def test_wrong_field_types_and_unknown_config_keys_are_refused(tmp_path):
    import json

    from dataperf import results
    from dataperf.errors import UserError

    d = json.loads(results.to_json(_rec()))
    for k, v, needle in (("samples_per_s_repeats", "fast", "samples_per_s_repeats"),
                         ("config", {"nope": 1}, "unknown loader config")):
        with pytest.raises(UserError, match=needle):
            results.from_dict({**d, k: v})


def test_compare_takes_a_zero_base_as_infinite_change_and_refuses_no_common_metric(tmp_path):
    from click.testing import CliRunner

    from dataperf import results
    from dataperf.cli import cli
    from dataperf.workflows import compare

    assert compare.pct_change(0.0, 4060.0) == float("inf")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    results.append(a, _rec())
    results.append(b, _rec())
    r = CliRunner().invoke(cli, ["compare", str(a), str(b), "--metrics", "step_ms"])
    assert r.exit_code == 2 and r.output.startswith("error: none of the metrics")


def _alias_names(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A results file and four other names of it: a symlink, a hard link, a symlink through a symlinked folder,
    and the folder spelled with `..`."""
    real = tmp_path / "r" / "real.jsonl"
    real.parent.mkdir()
    real.write_bytes(b"")
    (tmp_path / "r" / "alias.jsonl").symlink_to("real.jsonl")
    os.link(real, tmp_path / "hard.jsonl")
    (tmp_path / "rl").symlink_to(tmp_path / "r")
    return real, [tmp_path / "r" / "alias.jsonl", tmp_path / "hard.jsonl", tmp_path / "rl" / "alias.jsonl",
                  tmp_path / "r" / ".." / "r" / "real.jsonl"]


def test_a_symlink_or_hard_link_to_a_held_results_file_is_refused_naming_the_holder(tmp_path, datasets):
    """The lock is the file's, not its name's: a second sweep through a symlink, a hard link or a symlinked folder
    is refused with the holder's pid, as through the same path (both sweeps wrote one file)."""

    from click.testing import CliRunner

    from dataperf.cli import cli

    real, aliases = _alias_names(tmp_path)
    with held_elsewhere(real) as holder_pid:
        for alias in aliases:
            r = CliRunner().invoke(cli, ["sweep", str(datasets["image-webdataset"]), "--num-workers", "0",
                                         "--batch-size", "8", "--no-collect", "--out", str(alias), "--resume"])
            assert r.exit_code == 2 and f"pid {holder_pid}" in r.output, (alias, r.output)
        assert real.read_bytes() == b""


@pytest.mark.slow
def test_appends_from_four_processes_through_four_names_of_one_file_lose_nothing(tmp_path):
    """The review's stress: four processes append 150 records each through the file, its hard link, its symlink
    and a symlink in a symlinked folder. Each waits its turn (a busy lock is retried), so every record is in the
    file once, and no line is damaged."""
    import subprocess
    import sys

    real, aliases = _alias_names(tmp_path)
    code = ("import sys\nfrom dataperf import results\nfrom dataperf.errors import UserError\n"
            "for i in range(150):\n"
            "    while True:\n"
            "        try:\n"
            "            results.append(sys.argv[1], results.LoaderResult(data='d', config_key=f'{sys.argv[2]}-{i}',"
            " env={'x': 1}))\n"
            "            break\n"
            "        except UserError as e:\n"
            "            assert 'being written by another dataperf run' in str(e), e\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    names = [real, *aliases[:3]]
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n), str(k)], env=env, stderr=subprocess.PIPE,
                              text=True) for k, n in enumerate(names)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    keys = [r.config_key for r in results.load(real)]
    assert sorted(keys) == sorted(f"{k}-{i}" for k in range(4) for i in range(150))
    assert real.read_bytes().count(b"\n") == 600


@pytest.mark.slow
def test_a_dataloader_worker_that_outlives_a_killed_run_does_not_keep_its_lock(tmp_path):
    """SIGKILL a sweep while its DataLoader worker is blocked in the user's __getitem__: the orphaned worker lives
    on, and the next run (--resume) takes the lock at once, instead of being refused in the name of a dead pid."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    (tmp_path / "hang2.py").write_text(
        "import os, time, torch\nfrom torch.utils.data import Dataset\n"
        "class H(Dataset):\n"
        "    def __len__(self): return 400\n"
        "    def __getitem__(self, i):\n"
        "        if torch.utils.data.get_worker_info() is not None and i % 50 == 7:\n"
        f"            open({str(tmp_path / 'worker.pid')!r}, 'w').write(str(os.getpid()))\n"
        "            time.sleep(600)\n"
        "        return torch.zeros(3, 16, 16), 0\n"
        "def hang_in_worker(): return H()\n")
    out = tmp_path / "stuck.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])]))
    p = subprocess.Popen([sys.executable, "-m", "dataperf", "sweep", "--dataset", "hang2:hang_in_worker",
                          "--batch-size", "4", "--num-workers", "1", "--prefetch-factor", "2", "--no-collect",
                          "--repeats", "3", "--out", str(out)], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    marker = tmp_path / "worker.pid"
    orphan = None
    try:
        for _ in range(1200):  # a hang guard (120 s), not a margin: the worker writes the marker as it blocks
            if marker.exists() and marker.read_text():
                break
            time.sleep(0.1)
        orphan = int(marker.read_text())
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        assert psutil.pid_exists(orphan), "the worker must outlive its run for this test to test anything"
        with results.exclusive(out):  # the next run: not refused
            pass
    finally:
        p.kill()
        p.wait()
        if orphan is not None and psutil.pid_exists(orphan):
            os.kill(orphan, signal.SIGKILL)
