"""tune: the prediction from the limits (arithmetic), the search path and the confirmation on stand-in
measurements whose answers are set in advance, and one real run through the command."""

import math

import pytest
from click.testing import CliRunner

from dataperf import results
from dataperf.cli import cli
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions
from dataperf.results import DecisionResult, LimitsResult, LoaderConfig, LoaderResult, StepResult
from dataperf.workflows.tune import Tuner, TuneRequest
from dataperf.workflows.tune_predict import predict_batch, predict_workers

OPTS = TrialOptions(repeats=5, min_batches=5)
CHOICES = [0, 1, 2, 4, 8, 16, 32]


def limits_of(per_worker=100.0, decode=750.0, main=1e6, storage=math.inf):
    """A stand-in for measure_limits: the probe's ceilings set in advance; records each call."""
    calls = []

    def measure(data, cfg, opts, step=None, best=None, lopts=None, advance=None):
        calls.append(cfg)
        return LimitsResult(config=cfg.__dict__, config_key=cfg.key(), per_worker_samples_per_s=per_worker,
                            decode_samples_per_s=decode, main_process_samples_per_s=main,
                            storage_samples_per_s=storage, binding_limit="decode", binding_samples_per_s=decode)

    measure.calls = calls
    return measure


def fake_trial(rate):
    """A stand-in storage whose rate is rate(workers, prefetch, batch, call number of that config)."""
    calls = []

    def trial(data, cfg, opts):
        n = sum(c.key() == cfg.key() for c, _ in calls)
        calls.append((cfg, opts))
        return LoaderResult(config=cfg.__dict__, config_key=cfg.key(),
                            samples_per_s_median=rate(cfg.num_workers, cfg.prefetch_factor, cfg.batch_size, n))

    trial.calls = calls
    return trial


def test_predicted_batch_gives_the_main_process_room():
    """The main process takes 1000 samples/s at batch 32, decode allows 1500: it needs 1.5 x 1500 = 2250, so
    batch 128 (4000, assuming its cost is per batch); with room to spare the batch is kept."""
    lim = LimitsResult(main_process_samples_per_s=1000.0, decode_samples_per_s=1500.0)
    assert predict_batch(lim, 32, 256)[0] == 128
    assert predict_batch(lim, 32, 64)[0] == 64  # no further than the largest batch allowed
    assert predict_batch(lim, 32, 256, target=500)[0] == 32  # a target the main process sustains
    lim.main_process_samples_per_s = 1e5
    b, why = predict_batch(lim, 32, 256)
    assert b == 32 and "kept" in why


def test_predicted_workers_reach_the_ceiling_and_no_more_than_have_work():
    lim = LimitsResult(per_worker_samples_per_s=100.0, decode_samples_per_s=750.0, main_process_samples_per_s=1e6)
    p = predict_workers(lim, 32, 32, CHOICES, None)
    assert p.num_workers == 8 and p.samples_per_s == pytest.approx(750)  # 8 x 100 >= 750 > 4 x 100
    p = predict_workers(lim, 32, 32, [0, 1, 2, 3, 4, 8], 3)  # 3 shards: 3 workers have work
    assert p.num_workers == 3 and p.samples_per_s == pytest.approx(300) and "only 3 can have work" in p.why
    assert predict_workers(lim, 32, 32, CHOICES, None, target=250).num_workers == 4
    assert predict_workers(lim, 32, 32, CHOICES, None, target=50).num_workers == 0  # one stream gives 2x
    # a model as the target: no workers would load serially with its step, so one worker at the least
    assert predict_workers(lim, 32, 32, CHOICES, None, target=50, inline=False).num_workers == 1
    lim.main_process_samples_per_s = 200.0  # at batch 32; 400 at batch 64
    assert predict_workers(lim, 64, 32, CHOICES, None).num_workers == 4


def test_cpu_bound_workers_past_the_cores_are_not_predicted():
    """The H200's tune probe, its numbers: 16 usable cores, 16 workers at 151 samples/s each, decode 6.04 ms CPU
    of 6.18 ms wall a sample, a target of 2,640. 20 workers were predicted (20 x 151 >= 2,640); on those cores
    they share 16 cores' time, so the prediction is 16, short of the target, and says why. Samples that wait
    (CPU 1 ms of 6 ms wall: remote reads) still get more workers than cores."""
    lim = LimitsResult(usable_cores=16, per_worker_samples_per_s=151.1, decode_samples_per_s=2647.0,
                       main_process_samples_per_s=5463.0, decode_cpu_ms_per_sample=6.04,
                       decode_wall_ms_per_sample=6.18)
    ladder = [0, 1, 2, 4, 8, 16, 20]
    p = predict_workers(lim, 256, 256, ladder, 20, target=2640.0)
    assert p.num_workers == 16 and p.samples_per_s == pytest.approx(16 * 151.1)
    assert "more workers than the 16 cores share them" in p.why
    lim.decode_cpu_ms_per_sample = 1.0
    assert predict_workers(lim, 256, 256, ladder, 20, target=2640.0).num_workers == 20


def test_search_from_the_prediction_finds_the_best_and_confirms_the_top_two():
    """Predicted w=8 bs=32 (decode 750 / 100 per worker); the surface peaks at w=16 bs=64 pf=2: one rung up
    and one batch up find it (the next two steps up lose: one that does not gain is passed over), a second
    pass checks the rungs beside it at batch 64,
    prefetch does not help, and the top two are confirmed A B B A with the full trial options; the search
    trials use short repeats."""
    def rate(w, pf, bs, n):
        return {8: 700, 16: 800, 32: 780}.get(w, 100) * {64: 1.1, 128: 1.0}.get(bs, 1.0) * (0.99 if pf == 4 else 1)

    trial, lim = fake_trial(rate), limits_of()
    out = Tuner(TuneRequest("d", LoaderConfig(backend="webdataset", batch_size=32, decode=True), OPTS, max_workers=32),
                trial=trial, limits_of=lim).run()
    path = [(s.phase, s.result.config["num_workers"], s.result.config["batch_size"],
             s.result.config["prefetch_factor"]) for s in out.steps]
    a, b = ("confirm", 16, 64, 2), ("confirm", 16, 64, 4)  # the two fastest of the search
    assert path == [("predict", 8, 32, 2), ("workers", 16, 32, 2), ("workers", 32, 32, 2),
                    ("batch_size", 16, 64, 2), ("batch_size", 16, 128, 2), ("batch_size", 16, 256, 2),
                    ("workers", 32, 64, 2),
                    ("workers", 8, 64, 2), ("prefetch", 16, 64, 4), a, b, b, a]
    assert out.pick.config["num_workers"] == 16 and out.pick.config["batch_size"] == 64
    assert out.pick.config["prefetch_factor"] == 2 and out.pick_samples_per_s == pytest.approx(880)
    assert out.prediction.num_workers == 8 and len(lim.calls) == 2  # the probe, then the pick's limits
    assert all(o.repeats == 3 and o.max_batches is not None for _, o in trial.calls[:9])
    assert all(o is OPTS for _, o in trial.calls[9:])
    assert "confirmed" in out.stop_reason and out.limits is not None and out.recommendation is None


def test_a_pick_that_differs_from_the_probe_in_prefetch_alone_keeps_the_probes_ceilings(monkeypatch):
    """The probe (4 workers on 4 cores, batch 32) and a pick with a deeper prefetch have the same ceilings: they
    are measured once (on the H200 twice, 16 s more), and recorded for the pick, saying where they came from."""
    monkeypatch.setattr("dataperf.verdict.machine_cores", lambda: 4)

    def rate(w, pf, bs, n):
        return {4: 400, 2: 200}.get(w, 100) * (1.1 if pf == 4 else 1.0)

    lim = limits_of()
    out = Tuner(TuneRequest("d", LoaderConfig(backend="webdataset", batch_size=32, decode=True), OPTS, max_workers=4,
                            max_batch=32),
                trial=fake_trial(rate), limits_of=lim).run()
    assert (out.pick.config["num_workers"], out.pick.config["prefetch_factor"]) == (4, 4)
    assert len(lim.calls) == 1 and lim.calls[0].prefetch_factor == 2  # the probe only
    assert out.limits.config_key == out.pick.config_key and out.limits.best_config_key == out.pick.config_key
    assert "measured on the probe config" in out.limits.workers_how


def test_workers_that_tie_at_the_first_batch_are_tried_again_at_the_batch_the_search_moves_to():
    """The H200's surface (2026-12-03, WebDataset JPEGs, 16 cores), rounded: at batch 32 the main process caps
    16 and 32 workers alike (9,800 and 9,600), so the worker step keeps 16; batch 128 then lifts 16 workers
    to 11,200 and 32 to 12,000 (+7%). One pass stopped at w=16 bs=128 (the pick was 0.75 of the grid's best);
    the second pass's worker step finds w=32 there, and batch 256 (+4%) is the faster of the two confirmed."""
    table = {(32, 32): 9600, (16, 32): 9800, (16, 64): 10400, (16, 128): 11200, (16, 256): 10300,
             (32, 64): 9700, (32, 128): 12000, (32, 256): 12500}

    def rate(w, pf, bs, n):
        return table.get((w, bs), 5000) * (0.99 if pf == 4 else 1)

    out = Tuner(TuneRequest("d", LoaderConfig(backend="webdataset", batch_size=32, decode=True), OPTS, max_workers=32),
                trial=fake_trial(rate), limits_of=limits_of(per_worker=633, decode=15800, main=27000)).run()
    path = [(s.phase, s.result.config["num_workers"], s.result.config["batch_size"]) for s in out.steps
            if s.phase not in ("confirm", "prefetch")]
    assert path == [("predict", 32, 32), ("workers", 16, 32), ("batch_size", 16, 64), ("batch_size", 16, 128),
                    ("batch_size", 16, 256), ("workers", 32, 128), ("batch_size", 32, 256)]
    assert (out.pick.config["num_workers"], out.pick.config["batch_size"]) == (32, 256)
    assert out.pick_samples_per_s == 12500


def test_a_larger_batch_that_does_not_gain_is_passed_over_once():
    """The 2-core surface (2026-12-03, 24,000 JPEGs): at 2 workers batch 64 ties batch 32 and 128 gains 9%; the
    climb passes over 64 to find 128, and stops after two larger batches that do not gain (256, then none)."""
    table = {32: 2630, 64: 2650, 128: 2860, 256: 2690}

    def rate(w, pf, bs, n):
        return table[bs] if w == 2 else 1200

    out = Tuner(TuneRequest("d", LoaderConfig(backend="webdataset", batch_size=32, decode=True), OPTS, max_workers=4),
                trial=fake_trial(rate), limits_of=limits_of(per_worker=1225, decode=2681, main=14437)).run()
    path = [(s.phase, s.result.config["num_workers"], s.result.config["batch_size"]) for s in out.steps
            if s.phase not in ("confirm", "prefetch")]
    assert path == [("predict", 4, 32), ("workers", 2, 32), ("workers", 1, 32), ("batch_size", 2, 64),
                    ("batch_size", 2, 128), ("batch_size", 2, 256), ("workers", 4, 128), ("workers", 1, 128)]
    assert (out.pick.config["num_workers"], out.pick.config["batch_size"]) == (2, 128)


def test_one_lucky_search_trial_does_not_decide():
    """w=4's first (search) trial is lucky; confirmed, w=2 is faster."""
    def rate(w, pf, bs, n):
        if w == 4 and pf == 2:
            return 1000 if n == 0 else 700
        return {2: 900, 1: 500, 0: 300, 8: 650, 4: 600}[w]

    out = Tuner(TuneRequest("d", LoaderConfig(batch_size=32, decode=True), OPTS, max_workers=8, max_batch=32),
                trial=fake_trial(rate), limits_of=limits_of(per_worker=300, decode=1000)).run()
    assert out.prediction.num_workers == 4
    assert out.pick.config["num_workers"] == 2 and out.pick_samples_per_s == 900
    assert out.confirmed == {"files bs=32 w=4 pf=2 decode shuffled warm": [700, 700],
                             "files bs=32 w=2 pf=2 decode shuffled warm": [900, 900]}


def test_configs_a_lucky_search_trial_cannot_be_told_from_are_confirmed_too():
    """The 2-core run (2026-12-03): batch 32's search trial was lucky, [3126, 2793, 3231]; batch 128's median
    (2990) reaches its slowest repeat, so it is confirmed beside the two fastest and, steadier, wins."""
    def trial(data, cfg, opts):
        bs, pf = cfg.batch_size, cfg.prefetch_factor
        reps = {(32, 2): [3126, 2793, 3231], (32, 4): [3006, 2706, 3100], (128, 2): [2957, 2990, 3163],
                (64, 2): [2500, 2550, 2600], (256, 2): [2600, 2650, 2700], (128, 4): [2900, 2950, 2980]}
        if cfg.num_workers != 2:
            reps = [1000, 1000, 1000]
        elif opts is OPTS:  # the confirmation (the full trial options): batch 128 is steadier
            reps = [2950] * 3 if bs == 128 and pf == 2 else [2600] * 3
        else:
            reps = reps[(bs, pf)]
        trial.calls.append(cfg)
        return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=sorted(reps)[1],
                            samples_per_s_min=min(reps), samples_per_s_max=max(reps))

    trial.calls = []
    out = Tuner(TuneRequest("d", LoaderConfig(backend="webdataset", batch_size=32, decode=True), OPTS, max_workers=4),
                trial=trial, limits_of=limits_of(per_worker=1225, decode=2681, main=14437)).run()
    confirmed = [(s.result.config["batch_size"], s.result.config["prefetch_factor"]) for s in out.steps
                 if s.phase == "confirm"]
    assert sorted(set(confirmed)) == [(32, 2), (32, 4), (128, 2)] and len(confirmed) == 6
    assert (out.pick.config["batch_size"], out.pick.config["prefetch_factor"]) == (128, 2)


def test_with_a_target_the_cheapest_config_that_meets_it():
    """Target 350: predicted w=4 (4 x 100 per worker); w=2 meets it too, w=1 does not; confirmed, w=2. An
    unreachable target: the fastest, not met, and the binding limit named."""
    rates = {0: 80, 1: 190, 2: 380, 4: 760, 8: 760}
    out = Tuner(TuneRequest("d", LoaderConfig(batch_size=32, decode=True), OPTS, target=350, max_workers=8),
                trial=fake_trial(lambda w, pf, bs, n: rates[w]), limits_of=limits_of()).run()
    assert [s.result.config["num_workers"] for s in out.steps if s.phase != "confirm"] == [4, 2, 1]
    assert [s.result.config["num_workers"] for s in out.steps if s.phase == "confirm"] == [2, 4, 4, 2]
    assert out.met and out.pick.config["num_workers"] == 2 and "target met" in out.stop_reason
    out = Tuner(TuneRequest("d", LoaderConfig(batch_size=32, decode=True), OPTS, target=5000, max_workers=8,
                            max_batch=32),
                trial=fake_trial(lambda w, pf, bs, n: rates[w]), limits_of=limits_of()).run()
    assert not out.met and out.pick.config["num_workers"] == 8 and out.pick.config["prefetch_factor"] == 2
    assert "not met" in out.stop_reason and "lowest ceiling: decode" in out.stop_reason


def test_a_models_target_is_its_step_at_the_batch_tune_ends_with():
    """The main process takes 600 samples/s at batch 32 against decode's 750, so batch 64 is predicted; the
    step costs 100 ms a batch whatever its size, so the target is taken at batch 64 (640 x 1.2), never at 32."""
    steps = []

    def step_of(sopts):
        steps.append(sopts.batch_size)
        return StepResult(samples_per_s=sopts.batch_size * 10.0, batch_size=sopts.batch_size)

    rates = {4: 400, 8: 800, 16: 800}
    out = Tuner(TuneRequest("d", LoaderConfig(batch_size=32, decode=True), OPTS, sopts=StepOptions(batch_size=32),
                            headroom=1.2, max_workers=16, vary_batch=True),
                trial=fake_trial(lambda w, pf, bs, n: rates.get(w, 50)),
                limits_of=limits_of(main=600.0), step_of=step_of).run()
    assert out.prediction.batch_size == 64 and out.prediction.num_workers == 8
    assert out.pick.config["batch_size"] == 64 and out.pick.config["num_workers"] == 8
    assert steps == [64] and out.step.batch_size == 64
    assert out.target_samples_per_s == pytest.approx(768) and out.met
    rec = out.recommendation
    assert rec.pick is out.pick and rec.outcome == "feeds" and rec.step_samples_per_s == 640
    assert rec.binding_limit == "model"  # fed: the model binds


@pytest.mark.slow
def test_tune_finds_the_workers_that_feed_a_model_of_known_rate(tmp_path, monkeypatch, one_thread):
    """Known answer: samples each taking 50 ms (paced: 20 samples/s a worker) against a step of 4 samples every
    100 ms (40 samples/s; a target of 48 with the 1.2x headroom): 3 or more workers feed it with headroom, 2 give
    exactly its rate, 1 half of it. tune predicts from one worker's rate, searches, confirms fed, and ends with
    a pick the fed loop ran near the model's rate, its decision recorded with the prediction beside what was
    measured (the unreachable-target run this replaces checked only that its strings appeared). The periods are
    long beside a loaded box's scheduling delays, so load cannot move the answer."""
    monkeypatch.setenv("PACED_T", "0.05")
    monkeypatch.setenv("PACED_STEP_S", "0.1")
    monkeypatch.setenv("PACED_N", "100000")  # an epoch far longer than the run: no worker restarts in it
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(cli, ["tune", "--dataset", "paced:sleep_map", "--model", "paced:fixed_step_model",
                                 "--input", "image", "--batch-size", "4", "--max-batch-size", "4",
                                 "--no-collect", "--repeats", "3", "--min-batches", "3", "--cache", "warm",
                                 "--repeat-seconds", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    recs = results.load(out)
    d = recs[-1]
    assert isinstance(d, DecisionResult) and d.command == "tune" and d.confirmed
    # the step alone on the 3 x 8 x 8 floats the dataset gives (no --image-size said so): 40 samples/s
    step = next(r for r in recs if isinstance(r, StepResult))
    assert step.image_shape == [3, 8, 8] and step.samples_per_s == pytest.approx(40, rel=0.05), step
    # 2 workers give the model's rate exactly (fed, within 2% of more workers: the cheapest then wins); 1 gives half
    assert d.config["num_workers"] >= 2 and d.fed_samples_per_s >= 0.85 * 40, (d.config, d.answer)
    first = d.predictions[0]  # the limits' prediction of the first config, and that config measured
    assert first["predicted"] == pytest.approx(first["measured"], rel=0.15), d.predictions
    # like with like: the prediction (one worker's rate x workers) against the rate the trial's batches stream
    # at, not its training rate (start-up and tail in it)
    trial = next(x for x in recs if isinstance(x, LoaderResult) and x.config_key == first["config"])
    assert first["measured_as"] == "steady" and first["measured"] == trial.samples_per_s_median, first
    assert "prediction: " in r.output and "confirmed end to end" in r.output and "answer: DataLoader(" in r.output


def test_with_a_model_the_training_batch_is_kept_and_no_workers_is_not_concluded_from_a_loader_rate():
    """The 2026-12-06 audit's S1b: the loader alone gives 53 samples/s with no workers against a model taking 15;
    no workers feed it 12 (serial with the step), one worker feeds it. tune keeps batch 8 (never 16-256 unless
    --vary-batch), predicts one worker, and never picks none."""
    step = StepResult(samples_per_s=15.0, batch_size=8, cpu_cores_busy_median=1.0)
    out = Tuner(TuneRequest("d", LoaderConfig(batch_size=8, decode=True), OPTS, sopts=StepOptions(batch_size=8),
                            headroom=1.2, max_workers=4),
                trial=fake_trial(lambda w, pf, bs, n: 53.0 * max(w, 1)),
                limits_of=limits_of(per_worker=53.0, decode=106.0, main=2000.0), step_of=lambda s: step).run()
    assert out.prediction.batch_size == 8 and out.prediction.num_workers == 1
    assert {s.result.config["batch_size"] for s in out.steps} == {8}
    assert out.pick is not None and out.pick.config["num_workers"] >= 1


def test_a_spent_budget_ends_the_search_with_a_pick():
    """A budget the first trial already spends: no neighbour is tried, and tune still ends with the one it
    measured, saying what the budget cut."""
    def slow_trial(data, cfg, opts):
        import time as _t
        _t.sleep(0.3)
        return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=100.0 * cfg.num_workers)

    out = Tuner(TuneRequest("d", LoaderConfig(batch_size=8, decode=True), OPTS, target=1e6, max_workers=8,
                            budget_s=0.2),
                trial=slow_trial, limits_of=limits_of()).run()
    assert out.pick is not None and len(out.steps) <= 1 + 2  # the first trial, then the confirmation rounds
    assert "the search stopped" in out.cut
