from dataperf import verdict
from dataperf.commands import _render
from dataperf.results import LimitsResult, LoaderConfig, LoaderResult, StepResult


def loader(sps, workers, pf=None, cache="warm", decode=True, verified=True):
    cfg = LoaderConfig(backend="files", num_workers=workers, prefetch_factor=pf, cache=cache, decode=decode)
    return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=sps,
                        samples_per_s_min=sps, samples_per_s_max=sps, cache_mode=cache, cache_verified=verified)


def test_verdict_text():
    assert _render.verdict_text(verdict.fit(60, 100)).startswith("input-bound by 40%")
    assert "1.50x headroom" in _render.verdict_text(verdict.fit(150, 100))
    assert "below the 1.2x headroom" in _render.verdict_text(verdict.fit(110, 100))


def test_recommendation_line_formats_each_outcome():
    rs = [loader(90, 0), loader(130, 1, 2), loader(400, 4, 8)]
    line = _render.recommendation_line(verdict.recommend(rs, StepResult(samples_per_s=100.0), 1.2))
    assert line == ("recommended: files bs=32 w=1 pf=2 decode shuffled warm (backend files) feeds the model "
                    "(130 samples/s a training epoch vs 100, 1.30x, the cheapest with 1.2x headroom; predicted fed "
                    "100 samples/s mid-epoch, the model idle 0%; not confirmed fed)")
    line = _render.recommendation_line(verdict.recommend(rs, StepResult(samples_per_s=1000.0), 1.2))
    assert line.startswith("INPUT-BOUND: no config tried feeds the step rate of 1,000 samples/s; the best, "
                           "files bs=32 w=4 pf=8 decode shuffled warm (backend files): predicted fed 400 samples/s "
                           "mid-epoch, the model idle 60%")
    rec = verdict.recommend(rs, StepResult(samples_per_s=1000.0), 1.2)
    rec.lower_bound, rec.lower_bound_why = True, "8 workers were not tried (the budget ended first)"
    assert _render.recommendation_line(rec).startswith("NOT SETTLED: no config tried feeds")
    assert _render.recommendation_line(rec).endswith("a lower bound, not a verdict: 8 workers were not tried (the "
                                                    "budget ended first)")
    line = _render.recommendation_line(verdict.recommend([loader(110, 2, 2)], StepResult(samples_per_s=100.0), 1.2))
    assert "feeds the model" in line and "none tried has 1.2x headroom" in line
    assert _render.recommendation_line(verdict.recommend(rs)).startswith("recommended: files bs=32 w=4 pf=8")
    rs = [loader(1000, 8, 2, "warm"), loader(900, 4, 2, "cold", verified=False)]
    assert _render.recommendation_line(verdict.recommend(rs)).endswith(
        "(1 cold trial(s) not verified as cold: judged as warm)")
    assert _render.recommendation_line(verdict.recommend([])) == "no trial succeeded; see the errors above"


def staged_loader() -> LoaderResult:
    """400 samples/s (2.5 ms a sample) from 4 workers of 10 ms each, 7.5 of it decode; the consumer blocked on
    them 2.3 ms of its 2.5 beyond a 0.1 ms hand-over."""
    r = loader(400, 4, 8)
    r.stage_ms_per_sample = {"read": 1.0, "decode": 7.5, "transform": 1.0, "collate": 0.5, "transfer": 0.1}
    r.main_wait_ms_per_sample = 2.4
    r.cpu_cores_busy_median, r.env = 3.9, {"cpu_count": 4}  # the 4 cores full
    return r


def test_an_input_bound_answer_attacks_its_binding_limit_on_hardware_the_machine_has():
    rec = verdict.recommend([staged_loader()], StepResult(samples_per_s=1000.0, device="cuda"), 1.2)
    assert rec.outcome == "input_bound" and rec.binding_limit == "decode"
    assert verdict.answer(rec)[-1] == ("attack: decode 7.50 ms a sample: decode on the GPU (--backend dali "
                                       "--dali-decode mixed), or store fewer pixels")
    rec = verdict.recommend([staged_loader()], StepResult(samples_per_s=1000.0, device="cpu"), 1.2)
    assert verdict.answer(rec)[-1] == ("attack: decode 7.50 ms a sample: a cheaper decode: store fewer pixels or a "
                                       "faster codec, or more cores")
    assert not any(a.startswith("attack") for a in verdict.answer(
        verdict.recommend([staged_loader()], StepResult(samples_per_s=100.0), 1.2)))  # it feeds: nothing to attack


def test_the_limits_table_shows_each_stage_beside_the_ceiling_it_spends(capsys):
    """Decode and transform spend the cores (the decode ceiling, 500 samples/s: the trial's 400 use 80% of it),
    read the storage (4,000: 10%), transfer the main process (10,000: 4%)."""
    r = staged_loader()
    lim = LimitsResult(config=r.config, usable_cores=2, storage_samples_per_s=4000.0, storage_how="page cache",
                       decode_samples_per_s=500.0, decode_how="2 cores", main_process_samples_per_s=10000.0,
                       main_process_how="copies", binding_limit="decode", binding_samples_per_s=500.0)
    _render.print_limits(lim, r)
    rows = {line.split("│")[1].strip(): line for line in capsys.readouterr().out.splitlines() if line.count("│") > 3}
    assert "decode 7.5, transform 1" in rows["decode (binding)"] and "80%" in rows["decode (binding)"]
    assert "read 1" in rows["storage"] and "10%" in rows["storage"]
    assert "transfer 0.1" in rows["main_process"] and "4%" in rows["main_process"]


def _text(table, width: int) -> str:
    from rich.console import Console

    c = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    c.print(table)
    return c.export_text()


def test_the_short_table_fits_100_columns_and_flags_rows_not_to_read_at_face_value():
    """The full table is about 240 columns; at 100 rich cut its numbers. The short one keeps every figure whole,
    says tokens/s for token data (samples/s x real tokens a sample), and flags a noisy or idle row."""
    calm, noisy = loader(12345.6, 4, 2), loader(23456.7, 8, 2)
    noisy.samples_per_s_min, noisy.samples_per_s_max, noisy.samples_per_s_spread_pct = 20000.0, 26000.0, 25.6
    noisy.active_workers = 6
    for r in (calm, noisy):
        r.tokens_per_sample = 1024.0
    rec = verdict.recommend([calm, noisy], StepResult(samples_per_s=20000.0))
    text = _text(_render.loader_table([calm, noisy], rec), 100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "12,346" in text and "23,457 (±13%)" in text
    assert f"{23456.7 * 1024:,.0f}" in text and "tokens/s" in text
    assert _render.flags(noisy) == ["[yellow]noisy: repeats 26% apart[/yellow]", "[red]2 of 8 workers idle[/red]"]
    assert _render.flags(calm) == []
    wide = _text(_render.loader_table([calm, noisy], rec), 200)
    assert "noisy: repeats 26% apart, 2 of 8 workers idle" in wide
    full = _text(_render.loader_table([calm, noisy], verbose=True), 300)
    assert "MiB/s payload/storage" in full and "per GiB PSS" in full
    assert "tokens/s" not in _text(_render.loader_table([loader(100.0, 2, 2)]), 100)  # image data: none


def test_a_label_shows_the_transform_and_never_shuffled_where_the_backend_ignored_it(tmp_path):
    """issue 53: `jsonl bs=32 w=1 pf=2 raw shuffled warm` beside "ignores shuffle", and `--transform
    imagenet-train` runs labelled like plain resize ones."""
    import json

    from click.testing import CliRunner

    from dataperf.cli import cli
    from dataperf.results import LoaderConfig

    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"text": f"line {i} " * 9}) + "\n" for i in range(200)))
    r = CliRunner().invoke(cli, ["bench", f"{tmp_path / 't.jsonl'}#tokenizer=bytes", "--batch-size", "8",
                                 "--num-workers", "1", "--repeats", "1", "--no-collect"])
    assert r.exit_code == 0, r.output
    assert "ignores shuffle" in r.output and "shuffled" not in r.output
    assert "jsonl bs=8 w=1 pf=2 raw own order warm" in " ".join(r.output.split())
    cfg = LoaderConfig(backend="files", decode=True, transform="imagenet-train")
    assert cfg.short() == "files bs=32 w=0 decode tf=imagenet-train shuffled warm"
    resize = LoaderConfig(backend="files", decode=True, transform="resize")
    assert resize.short() == "files bs=32 w=0 decode shuffled warm"


def test_two_warnings_under_the_table_are_each_shown(capsys):
    """Trial notes are shown once a kind (the text before the first colon): a warning's kind is the text after
    `warning: `, so a leak on one trial is not hidden behind idle workers on another."""
    idle, leaking = loader(100, 8, 2), loader(90, 2, 2)
    idle.notes = ["warning: idle workers: only 6 of 8 DataLoader workers delivered samples"]
    leaking.notes = ["warning: worker memory grows: the DataLoader workers' private memory grew"]
    _render.print_trial_notes([idle, leaking])
    out = capsys.readouterr().out
    assert "idle workers: only 6 of 8" in out and "worker memory grows" in out, out
