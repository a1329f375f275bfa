"""What a table of trials cannot show by itself (dataperf.verdict.findings)."""

from dataperf.results import LoaderConfig, LoaderResult, StepResult
from dataperf.verdict.findings import idle_warning, verdict_caveats


def loader(sps: float, workers: int, decode: bool = True, active: int | None = None, shards: int | None = None,
           batch: int = 32) -> LoaderResult:
    cfg = LoaderConfig(backend="files", batch_size=batch, num_workers=workers, decode=decode)
    return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=sps, active_workers=active,
                        shards=shards)


def test_undecoded_trials_get_no_verdict_and_say_so():
    assert "no verdict" in verdict_caveats([loader(400, 4, decode=False)], StepResult(samples_per_s=100.0))[0]
    assert verdict_caveats([loader(400, 4, decode=False)], None) == []


def test_a_cpu_step_and_another_batch_size_are_named():
    notes = verdict_caveats([loader(400, 4, batch=64)], StepResult(samples_per_s=100.0, device="cpu", batch_size=32))
    assert any("measured apart on this CPU" in n for n in notes)
    assert any("batch [64]" in n for n in notes)


def test_idle_workers_name_the_shards_to_make():
    assert idle_warning([loader(400, 4, active=4)]) is None
    line = idle_warning([loader(100, 8, active=2, shards=2), loader(400, 4, active=4)])
    assert line.startswith("warning: idle workers in 1 trial(s)") and "--shards 8" in line, line
    # no tar shards (Parquet row groups): no "shards convert", each trial's note names its own fix
    line = idle_warning([loader(100, 8, active=2)])
    assert "shards convert" not in line and "units of work" in line, line


def test_other_load_during_the_trials_is_warned_of():
    """Other processes kept a quarter of the cores (at least half a core) busy during a trial: its rate, and a
    pick made on it, follow that load."""
    from dataperf.verdict.findings import loaded_warning

    quiet, loaded = loader(400, 4), loader(300, 2)
    quiet.other_cores_busy_median, loaded.other_cores_busy_median = 0.1, 1.2
    quiet.env = loaded.env = {"usable_cores": 2}
    assert loaded_warning([quiet]) is None
    line = loaded_warning([quiet, loaded])
    assert line.startswith("warning: other processes kept 1.2 of the 2 cores busy") and "1 of 2 trials" in line


def test_fed_runs_replace_the_apart_caution_and_a_step_alone_slower_than_fed_is_warned_of():
    """The usability review: "fed 27 samples/s ... (step alone 13)" under a note that the fed rate is below both.
    With fed runs the apart-measurement caution goes; a fed run faster than the step alone says the step read
    slow."""
    from dataperf.results import E2EResult

    step = StepResult(samples_per_s=13.0, device="cpu", batch_size=32)
    run = E2EResult(samples_per_s=27.0, batch_size=32, confirm_round=1)
    notes = verdict_caveats([loader(400, 4), run], step)
    assert not any("measured apart" in n for n in notes)
    assert any(n.startswith("warning: the model fed ran 27 samples/s, faster than its step alone (13)") for n in notes)
    assert not any("faster than its step" in n for n in verdict_caveats([loader(400, 4)], step))
