"""The one contract of every command (docs/commands.md, exit codes): 0 ok, 1 a regression or unmet target, 2 with
exactly one `error:` line for a user mistake, found before measuring wherever it can be, 130 on Ctrl-C."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataperf import results
from dataperf.cli import cli

FAST = ["--repeats", "1", "--min-batches", "2", "--warmup-batches", "0", "--no-collect"]
ROOT = os.geteuid() == 0


def run(args: list[str]):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_error(r, code: int = 2, *needles: str) -> str:
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), r.output
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1, r.output
    for n in needles:
        assert n in errs[0], errs[0]
    return errs[0]


@pytest.fixture
def ro_dir(tmp_path):
    """A read-only tmpfs (root only), as a full or read-only disk is for a normal user."""
    if not ROOT:
        pytest.skip("mounting a tmpfs needs root")
    d = tmp_path / "ro"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(d)], check=True)
    yield d
    subprocess.run(["umount", str(d)], check=False)


def test_unwritable_outputs_are_refused_before_measuring(ro_dir, tmp_path, datasets):
    img = datasets["image-webdataset"]
    one_error(run(["sweep", img, "--num-workers", "0", *FAST, "--out", ro_dir / "s.jsonl"]), 2, "--out")
    one_error(run(["bench", img, *FAST, "--out", ro_dir / "b.jsonl"]), 2, "--out")
    one_error(run(["profile", img, "--model", "cnn-small", "--num-workers", "0", "--out-dir", ro_dir / "p"]), 2,
              "--out-dir")
    one_error(run(["e2e", datasets["image-files"], "--model", "cnn-small", "--nan-guard", ro_dir / "ck"]), 2,
              "--nan-guard")
    one_error(run(["sweep", img, "--num-workers", "0", *FAST, "--out", tmp_path / "p.jsonl", "--plot",
                   ro_dir / "h.png"]), 2, "--plot")
    assert not (tmp_path / "p.jsonl").exists()  # refused before trial 1
    (tmp_path / "dir.jsonl").mkdir()
    for cmd in (["sweep", img, "--num-workers", "0"], ["sweep", img, "--num-workers", "0", "--overwrite"],
                ["bench", img]):
        one_error(run([*cmd, "--out", tmp_path / "dir.jsonl"]), 2, "is a folder")


def test_every_trial_failed_is_exit_2_and_impossible_e2e_is_one_line(tmp_path, datasets):
    trunc = tmp_path / "trunc"
    subprocess.run(["cp", "-r", str(datasets["image-webdataset"]), str(trunc)], check=True)
    shard = sorted(trunc.glob("*.tar"))[-1]
    os.truncate(shard, 2000)
    r = run(["sweep", trunc, "--num-workers", "0", *FAST, "--out", tmp_path / "t.jsonl"])
    one_error(r, 2, "every trial failed")
    assert all(x.status == "failed" for x in results.load(tmp_path / "t.jsonl"))
    one_error(run(["e2e", trunc, "--model", "cnn-small", "--batch-size", "8", "--image-size", "32",
                   "--num-workers", "0", "--steps", "30", "--repeats", "1", "--no-predict"]), 2, "corrupt")
    one_error(run(["e2e", datasets["image-files"], "--model", "cnn-small", "--num-workers", "0",
                   "--prefetch-factor", "4", "--batch-size", "8", "--image-size", "32", "--steps", "2",
                   "--repeats", "1", "--no-predict"]), 2, "prefetch_factor")
    one_error(run(["profile", datasets["image-files"], "--model", "cnn-small", "--num-workers", "-1",
                   "--out-dir", tmp_path / "p"]), 2, "--num-workers")


def test_sizes_beyond_the_machine_are_refused(tmp_path, datasets):
    one_error(run(["shards", "make", "--count", "1", "--image-size", "100000", "--out", tmp_path / "m0"]), 2,
              "--image-size")
    assert not list(tmp_path.iterdir())  # no hidden .partial left
    one_error(run(["bench", datasets["image-webdataset"], "--num-workers", "100000", "--no-collect"]), 2, "cores")


def test_shm_too_small_predicts_the_bus_error(monkeypatch, datasets):
    from dataperf.measure import preflight

    monkeypatch.setattr(preflight, "shm_free_mib", lambda: 1.0)
    e = one_error(run(["bench", datasets["image-files"], "--decode", "--num-workers", "2", "--batch-size", "64",
                       "--image-size", "64", *FAST]), 2, "/dev/shm")
    assert "Bus error" in e


def test_a_model_and_data_that_do_not_match_are_refused(datasets):
    one_error(run(["e2e", datasets["tokens-webdataset"], "--model", "cnn-small", "--num-workers", "0"]), 2,
              "takes image input")
    one_error(run(["e2e", datasets["image-files"], "--model", "gpt-tiny", "--num-workers", "0"]), 2,
              "takes tokens input")
    one_error(run(["step", "--model", "gpt-tiny", "--seq-len", "9000"]), 2, "8192")
    one_error(run(["step", "--model", "tests.tiny_models:no_params", "--image-size", "16"]), 2, "no trainable")


def test_a_sweep_model_typo_is_found_before_the_grid(tmp_path, datasets):
    out = tmp_path / "m.jsonl"
    one_error(run(["sweep", datasets["image-webdataset"], "--num-workers", "0,1", *FAST, "--out", out,
                   "--model", "nosuchmod:make"]), 2, "nosuchmod")
    assert not out.exists()


def test_config_file_values_of_the_wrong_type_are_refused(tmp_path, datasets):
    for name, text, needle in (("w", 'num_workers: ["a", 1]\n', "num_workers"),
                               ("r", "num_workers: [0]\nrepeats: three\n", "repeats"),
                               ("i", "image_size: [32, 64]\nnum_workers: [0]\n", "image_size")):
        (tmp_path / f"{name}.yaml").write_text(text)
        one_error(run(["sweep", datasets["image-webdataset"], "--config", tmp_path / f"{name}.yaml",
                       "--no-collect", "--out", tmp_path / f"{name}.jsonl"]), 2, needle)


@pytest.mark.parametrize("args,needle", [
    (["sweep", "IMG", "--num-workers", "0,1", "--min-batches", "1", "--max-batches", "1"], "--min-batches"),
    (["sweep", "IMG", "--num-workers", ","], "--num-workers"),
    (["sweep", "IMG", "--nproc", "0", "--num-workers", "0"], "--nproc"),
    (["bench", "IMG", "--backend", "dali", "--dali-threads", "0"], "--dali-threads"),
    (["sweep", "IMG", "--num-workers", "0", "--model", "cnn-small", "--headroom", "-1"], "--headroom"),
    (["tune", "IMG", "--target-samples-per-s", "-5"], "--target-samples-per-s"),
    (["step", "--model", "gpt-tiny", "--seq-len", "0"], "--seq-len"),
])
def test_nonsense_option_values_are_refused(tmp_path, datasets, args, needle):
    """--min-batches 1 made 0-samples/s 'ok' trials; other nonsense values were accepted or replaced."""
    args = [str(datasets["image-webdataset"]) if a == "IMG" else a for a in args]
    one_error(run([*args, "--out", tmp_path / "x.jsonl"] if args[0] != "step" else args), 2, needle)


def test_a_nan_compare_threshold_is_refused(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text("")
    one_error(run(["compare", p, p, "--threshold", "nan"]), 2, "--threshold")


def test_a_resumed_success_supersedes_the_old_failure(tmp_path, datasets):
    out = tmp_path / "f.jsonl"
    img = datasets["image-webdataset"]
    failed = results.LoaderResult(data=str(img), status="failed", error="PermissionError: denied")
    from dataperf.results import LoaderConfig

    cfg = LoaderConfig(backend="webdataset", decode=True).explicit()  # the sweep's default on image data
    failed.config, failed.config_key = __import__("dataclasses").asdict(cfg), cfg.key()
    results.append(out, failed)
    r = run(["sweep", img, "--num-workers", "0", *FAST, "--out", out, "--resume"])
    assert r.exit_code == 0, r.output
    assert "PermissionError" not in r.output and "failed" not in r.output
    r = run(["report", out])
    assert r.exit_code == 0 and "PermissionError" not in r.output


def test_a_report_plot_without_ok_trials_says_so(tmp_path):
    out = tmp_path / "s.jsonl"
    results.append(out, results.LoaderResult(data="x", status="failed", error="boom"))
    r = run(["report", out, "--plot", tmp_path / "h.png"])
    assert "no plot: no loader trial succeeded" in r.output and not (tmp_path / "h.png").exists()


def test_the_same_dataset_named_twice_is_measured_once(tmp_path, datasets, monkeypatch):
    img = datasets["image-webdataset"]
    monkeypatch.chdir(img.parent)
    r = run(["sweep", img, img.name, f"./{img.name}", "--num-workers", "0", *FAST, "--out", tmp_path / "t.jsonl"])
    assert r.exit_code == 0, r.output
    assert [x.kind for x in results.load(tmp_path / "t.jsonl")] == ["loader", "decision"]


def test_more_ranks_than_shards_is_named(tmp_path, datasets):
    from dataperf.data.manifest import read_manifest

    tok = datasets["tokens-webdataset"]
    n = len(read_manifest(tok).shards) + 1
    one_error(run(["sweep", tok, "--nproc", n, "--num-workers", "0", "--out", tmp_path / "n.jsonl"]), 2,
              "shard(s) for")


@pytest.mark.parametrize("args", [["sweep", "x", "--num-workers", "1,x"], ["shards", "make", "--quality", "0"],
                                  ["nosuch"], ["bench", "--bogus"]])
def test_click_usage_errors_are_one_error_line(args):
    one_error(run(args), 2)


def test_ctrl_c_in_any_command_is_130(monkeypatch, datasets):
    from dataperf.measure import trial

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(trial, "_measure", interrupt)
    r = run(["bench", datasets["image-webdataset"], *FAST])
    assert r.exit_code == 130 and "Traceback" not in r.output


def test_a_ctrl_c_in_the_torchrun_launcher_is_130_with_the_resume_hint(tmp_path, monkeypatch, capsys):
    from dataperf.measure import distributed

    class Proc:
        signalled = None

        def __init__(self, *a, **k):
            pass

        def wait(self, timeout=None):
            if Proc.signalled is None:
                raise KeyboardInterrupt
            return 130

        def send_signal(self, sig):
            Proc.signalled = sig

    monkeypatch.setattr(distributed.subprocess, "Popen", Proc)
    with pytest.raises(SystemExit) as e:
        distributed.launch_self(2, ["sweep", "x"], on_interrupt=lambda: print("the one line", file=sys.stderr))
    assert e.value.code == 130 and Proc.signalled is not None
    assert capsys.readouterr().err == "the one line\n"


# --- the property: random options and random damage never break the contract ------------------------------

OPTION_VALUES = st.sampled_from(["-1", "0", "1", "3", "x", "", ",", "1,x", "nan", "99999999", "0.5", "1e9"])
COMMANDS = st.sampled_from([
    ["bench", "IMG", "--num-workers", "V", *FAST, "--max-batches", "3"],
    ["bench", "IMG", "--batch-size", "V", *FAST, "--max-batches", "3"],
    ["sweep", "IMG", "--num-workers", "V", *FAST, "--max-batches", "3", "--out", "OUT"],
    ["sweep", "IMG", "--prefetch-factor", "V", "--num-workers", "1", *FAST, "--max-batches", "3", "--out", "OUT"],
    ["report", "OUT"],
    ["compare", "OUT", "OUT", "--threshold", "V"],
    ["shards", "make", "--count", "V", "--image-size", "16", "--out", "NEW"],
    ["shards", "make", "--kind", "tokens", "--count", "4", "--sigma", "V", "--out", "NEW"],
    ["shards", "inspect", "IMG"],
    ["step", "--model", "gpt-tiny", "--seq-len", "V", "--batch-size", "1", "--steps", "1", "--repeats", "1",
     "--warmup", "0"],
])
DAMAGE = st.sampled_from(["none", "truncate_out", "garbage_out", "truncate_shard", "manifest"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(cmd=COMMANDS, value=OPTION_VALUES, damage=DAMAGE, cut=st.integers(1, 400))
def test_property_random_options_and_damage_keep_the_contract(tmp_path_factory, datasets, cmd, value, damage,
                                                              cut):
    root = tmp_path_factory.mktemp("prop")
    img = root / "img"
    subprocess.run(["cp", "-r", str(datasets["image-webdataset"]), str(img)], check=True)
    out = root / "s.jsonl"
    good = results.LoaderResult(data=str(img), config={"backend": "webdataset"}, config_key="k",
                                samples_per_s_repeats=[1.0, 2.0, 3.0])
    results.append(out, good)
    results.append(out, good)
    if damage == "truncate_out":
        os.truncate(out, max(out.stat().st_size - cut, 0))
    elif damage == "garbage_out":
        with open(out, "ab") as f:
            f.write(os.urandom(cut))
    elif damage == "truncate_shard":
        shard = sorted(img.glob("*.tar"))[0]
        os.truncate(shard, min(cut * 10, shard.stat().st_size))
    elif damage == "manifest":
        m = img / "manifest.json"
        m.write_bytes(m.read_bytes()[:cut])
    args = [{"IMG": str(img), "OUT": str(out), "NEW": str(root / "new"), "V": value}.get(a, a) for a in cmd]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code in (0, 1, 2, 130), (args, r.output)
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.output, r.exception)
    if r.exit_code == 2:
        assert sum(ln.startswith("error:") for ln in r.output.splitlines()) == 1, (args, r.output)
    if damage not in ("garbage_out",) and out.exists():
        results.load(out)  # still valid JSONL (a cut-short last line is allowed: it is skipped)


@pytest.mark.slow
def test_property_subprocess_runs_keep_the_contract(tmp_path, datasets):
    """A few real processes: the console script path, not only CliRunner."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    for args in (["bench", str(tmp_path / "nope")], ["sweep", "x", "--num-workers", "1,x"],
                 ["report", str(tmp_path / "nope.jsonl")]):
        p = subprocess.run([sys.executable, "-m", "dataperf", *args], capture_output=True, text=True, env=env)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert [ln for ln in p.stderr.splitlines() if ln.startswith("error:")], p.stderr
    json.dumps(args)


@pytest.mark.parametrize("cmd", ["bench", "sweep"])
@pytest.mark.parametrize("flag,value,limit", [("--repeats", "1000000000", "1000"),
                                              ("--repeat-seconds", "1e9", "3600")])
def test_absurd_repeats_are_refused_naming_the_limit(tmp_path, datasets, cmd, flag, value, limit):
    """`bench --repeats 1000000000` was accepted and ran silently for what would be years; now one line, exit 2,
    before anything is measured."""
    out = tmp_path / "b.jsonl"
    err = one_error(run([cmd, datasets["image-files"], "--no-collect", flag, value, "--out", out]), 2, flag,
                    f"limit of {limit}")
    assert "at most" in err and not out.exists()
