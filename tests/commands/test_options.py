"""One set of loader options and one of model _options, with each command's defaults from one table."""

import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.commands import _build, _options
from dataperf.data import as_data
from dataperf.errors import UserError


def params(command: str) -> dict:
    return {p.name: p for p in cli.commands[command].params}


@pytest.mark.parametrize("command", _options.COMMANDS)
def test_each_command_takes_exactly_the_options_and_defaults_of_the_table(command):
    got = params(command)
    for name, default in _options.defaults(command).items():  # each parameter named as its row
        assert name in got, (command, name)
        assert got[name].default == default, (command, name)
    absent = [n for n, row in _options.DEFAULTS.items() if row[_options.COMMANDS.index(command)] is _options.NO]
    assert not [n for n in absent if n in got and n not in ("batch_size", "image_size", "seq_len")], command


def test_one_spelling_of_each_option_across_commands():
    """--num-workers, --cache, --model ... are the same flags wherever they appear (only sweep takes lists)."""
    spellings: dict[str, set] = {}
    for command in _options.COMMANDS:
        for p in cli.commands[command].params:
            if p.param_type_name == "option":
                spellings.setdefault(p.name, set()).add(tuple(p.opts))
    assert all(len(s) == 1 for n, s in spellings.items() if n not in ("pin_memory", "persistent_workers")), spellings
    assert spellings["pin_memory"] == {("--pin-memory",)}  # sweep's off/on/both and everyone's flag agree


def test_optimizers_are_the_steps_own():
    from dataperf.measure import step

    assert tuple(_options.OPTIMIZERS) == step.OPTIMIZERS


def test_make_config_keeps_seq_len_to_token_streams_and_pins_with_cuda(datasets, tmp_path):
    img = as_data(datasets["image-files"])
    assert _build.make_config(img, seq_len=512).seq_len is None  # an image's config key carries no seq_len
    stream = tmp_path / "t.bin"
    stream.write_bytes(bytes(4096))
    assert _build.make_config(as_data(stream), seq_len=128).seq_len == 128
    assert _build.make_config(img, pin_memory=None, device="cuda:0").pin_memory
    assert not _build.make_config(img, pin_memory=None).pin_memory
    dali = _build.make_config(img, backend="dali", num_workers=4, prefetch_factor=4, persistent_workers=True)
    assert (dali.num_workers, dali.prefetch_factor, dali.persistent_workers, dali.dali_num_threads) == (0, None,
                                                                                                        False, 2)


def test_a_backends_own_knobs_come_from_their_declaration(datasets):
    """DALI's knobs reach its config by their option names, are refused below 1 with the options named, and a
    misspelt one is a caller's error, not a dropped option."""
    img = as_data(datasets["image-files"])
    c = _build.make_config(img, backend="dali", dali_threads=3, dali_queue=4, dali_decode="mixed")
    assert (c.dali_num_threads, c.dali_prefetch_queue_depth, c.dali_decode_device) == (3, 4, "mixed")
    assert _build.make_config(img, dali_threads=3).dali_num_threads is None  # the files backend has none
    with pytest.raises(UserError, match="--dali-threads and --dali-queue must be at least 1, got 0 and 2"):
        _build.make_config(img, backend="dali", dali_threads=0)
    with pytest.raises(TypeError, match="dali_thread"):
        _build.make_config(img, backend="dali", dali_thread=3)
    assert _options.defaults("sweep")["dali_threads"] == "1,2,4" and "dali_threads" not in _options.defaults("tune")


def test_make_grid_maps_off_on_both_and_refuses_empty_axes(datasets):
    img = as_data(datasets["image-files"])
    kw = dict(backend=["auto"], batch_size=[8], num_workers=[0, 2], worker_type=None, prefetch_factor=[2],
              pin_memory="both", persistent_workers="off", decode=True, image_size=32, cap_tokens=None,
              seq_len=512, cache="both", dali_threads=[1], dali_queue=[2], dali_decode=["cpu"], on_corrupt="skip",
              transform=None)
    g = _build.make_grid([img], **kw)
    assert g.pin_memory == [False, True] and g.cache == ["warm", "cold"] and g.seq_len is None
    assert g.on_corrupt == "skip" and g.worker_types == [None]
    with pytest.raises(UserError, match="--num-workers got no values"):
        _build.make_grid([img], **{**kw, "num_workers": []})


@pytest.mark.parametrize("command", [c for c in _options.COMMANDS if "backend" in _options.defaults(c)])
def test_backend_is_named_backend_and_the_old_format_still_parses(command):
    """--backend selects the loader; --format, its name before, still parses to the same parameter (old command
    lines keep working), while --help and error messages name --backend only."""
    cmd = cli.commands[command]
    opt = params(command)["backend"]
    assert opt.opts == ["--backend", "--format"]
    value = "auto,files" if command == "sweep" else "files"
    parsed = [cmd.make_context(command, ["DATA", flag, value]).params["backend"] for flag in ("--backend", "--format")]
    assert parsed[0] == parsed[1] == (["auto", "files"] if command == "sweep" else "files")
    help_text = CliRunner().invoke(cli, [command, "--help"]).output
    assert "--backend" in help_text and "--format" not in help_text
    if command != "sweep":  # sweep takes any comma list, checked against the registry when the grid is built
        r = CliRunner().invoke(cli, [command, "DATA", "--format", "nope"])
        assert r.exit_code == 2 and "Invalid value for '--backend'" in r.output, r.output


def test_split_cuts_values_into_groups():
    values = {"backend": "auto", "batch_size": 8, "model": "m", "device": "cpu", "repeats": 3}
    loader, model, rest = _options.split(values, "diagnose", "model")
    assert loader == {"backend": "auto", "batch_size": 8} and model == {"model": "m", "device": "cpu"}
    assert rest == {"repeats": 3} and values is rest


def test_report_refuses_a_nonsense_headroom(tmp_path):
    """Before: report --headroom -1 judged every config with a negative margin; now one error line."""
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "x.jsonl"), "--headroom", "-1"])
    assert r.exit_code == 2 and r.output.startswith("error: --headroom must be positive")


def test_repeat_seconds_default_is_the_runners():
    """options writes trial.DEFAULT_REPEAT_S out so --help does not load torch; the two must agree."""
    from dataperf.measure import trial

    assert _options.DEFAULT_REPEAT_S == trial.DEFAULT_REPEAT_S
    assert params("sweep")["repeat_seconds"].default == trial.DEFAULT_REPEAT_S


def test_repeat_seconds_zero_is_whole_epochs_and_negative_is_refused():
    kw = dict(repeats=3, warmup_batches=1, max_batches=None, min_batches=3, drop_caches=False, no_collect=True,
              ebpf=False, seed=0)
    assert _build.make_trial_options(**kw, repeat_seconds=0).repeat_seconds is None
    assert _build.make_trial_options(**kw, repeat_seconds=2.5).repeat_seconds == 2.5
    with pytest.raises(UserError, match="--repeat-seconds must be 0"):
        _build.make_trial_options(**kw, repeat_seconds=-1)


def test_shuffle_is_the_default_and_no_shuffle_reads_in_storage_order(datasets):
    img, shards = as_data(datasets["image-files"]), as_data(datasets["image-webdataset"])
    assert _build.make_config(img).shuffle and _build.make_config(img).shuffle_buffer is None
    assert not _build.make_config(img, shuffle=False).shuffle
    assert _build.make_config(shards, shuffle_buffer=64).shuffle_buffer == 64
    with pytest.raises(UserError, match="--shuffle-buffer must be at least 1"):
        _build.make_config(shards, shuffle_buffer=0)
    with pytest.raises(UserError, match="--no-shuffle"):
        _build.make_config(shards, shuffle=False, shuffle_buffer=64)


def test_sweep_shuffle_axis_off_on_both_and_the_buffer_only_where_a_buffer_is(datasets):
    kw = dict(backend=["auto"], batch_size=[8], num_workers=[0], worker_type=None, prefetch_factor=[2],
              pin_memory="off", persistent_workers="off", decode=False, image_size=32, cap_tokens=None,
              seq_len=512, cache="warm", dali_threads=[1], dali_queue=[2], dali_decode=["cpu"], on_corrupt="fail",
              transform=None)
    img, shards = as_data(datasets["image-files"]), as_data(datasets["image-webdataset"])
    assert _build.make_grid([img], **kw).shuffle == [True]
    assert _build.make_grid([img], **kw, no_shuffle=True).shuffle == [False]
    both = _build.make_grid([shards], **kw, shuffle="both", shuffle_buffer=50)
    assert [(c.shuffle, c.shuffle_buffer) for c in both.configs("webdataset")] == [(False, None), (True, 50)]
    assert [(c.shuffle, c.shuffle_buffer) for c in both.configs("files")] == [(False, None), (True, None)]
    with pytest.raises(UserError, match="disagree"):
        _build.make_grid([img], **kw, shuffle="both", no_shuffle=True)


@pytest.mark.slow
def test_bench_records_the_access_pattern_it_was_asked_for(tmp_path, datasets):
    out = tmp_path / "b.jsonl"
    for flag in ("--shuffle", "--no-shuffle"):
        r = CliRunner().invoke(cli, ["bench", str(datasets["image-files"]), flag, "--repeats", "2", "--no-collect",
                                     "--min-batches", "2", "--batch-size", "8", "--out", str(out)])
        assert r.exit_code == 0, r.output
    from dataperf import results

    assert [r.config["shuffle"] for r in results.load(out)] == [True, False]


def _one_error(r, *needles: str) -> str:
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert r.exit_code == 2 and len(errors) == 1 and "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert all(n in errors[0] for n in needles), errors[0]
    return errors[0]


@pytest.mark.parametrize("size", ["0", "-2"])
def test_tune_refuses_a_batch_size_below_1_up_front_like_bench_and_sweep(tmp_path, datasets, size):
    r = CliRunner().invoke(cli, ["tune", str(datasets["image-webdataset"]), "--batch-size", size, "--no-collect",
                                 "--out", str(tmp_path / "t.jsonl")])
    _one_error(r, f"--batch-size must be at least 1, got {size}")
    assert "binding limit" not in r.output and "stopped:" not in r.output  # nothing was measured


def test_tune_that_finds_no_config_that_runs_is_exit_2_never_0(tmp_path, datasets, monkeypatch):
    """Every image makes the transform raise, so the predicted config fails and tune has no pick: that was exit 0
    after "stopped: the predicted config failed"."""
    (tmp_path / "n9_transform.py").write_text("def broken():\n    def f(img):\n        raise ValueError('nope')\n"
                                              "    return f\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    r = CliRunner().invoke(cli, ["tune", str(datasets["image-webdataset"]), "--transform", "n9_transform:broken",
                                 "--batch-size", "8", "--image-size", "16", "--repeats", "3", "--repeat-seconds", "1",
                                 "--no-collect",
                                 "--out", str(tmp_path / "t.jsonl")])
    _one_error(r, "tune found no config that runs", "ValueError: nope")


@pytest.mark.parametrize("workers", ["-1", "0,-1"])
def test_sweep_refuses_a_negative_worker_count_as_bench_does(tmp_path, datasets, workers):
    """The grid left -1 out and then said "the sweep grid is empty" (or ran the rest without a word)."""
    r = CliRunner().invoke(cli, ["sweep", str(datasets["image-webdataset"]), "--num-workers", workers, "--no-collect",
                                 "--out", str(tmp_path / "s.jsonl")])
    assert _one_error(r) == "error: --num-workers must be >= 0, got -1"
    bench = CliRunner().invoke(cli, ["bench", str(datasets["image-webdataset"]), "--num-workers", "-1"])
    assert _one_error(bench) == "error: --num-workers must be >= 0, got -1"


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_stall_timeout_must_be_positive_and_reaches_the_trial_options(tmp_path, datasets, value):
    r = CliRunner().invoke(cli, ["bench", str(datasets["image-webdataset"]), "--stall-timeout", value])
    _one_error(r, "--stall-timeout must be a positive number of seconds")
    kw = dict(repeats=3, warmup_batches=1, max_batches=None, min_batches=3, drop_caches=False, no_collect=True,
              ebpf=False, seed=0)
    assert _build.make_trial_options(**kw, stall_timeout=7.5).stall_s == 7.5
    assert params("sweep")["stall_timeout"].default == _build.make_trial_options(**kw).stall_s == 120
