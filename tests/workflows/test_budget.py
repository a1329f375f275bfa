from dataclasses import replace

import pytest

from dataperf.data import Data
from dataperf.errors import UserError
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig, LoaderResult, StepResult
from dataperf.workflows import budget, sweep

DATA = Data(spec="x", location="/x", kind="image", format="files")
OPTS = TrialOptions(repeats=5, repeat_seconds=5.0)


def grid_trials(**axes):
    axes = {"num_workers": [0, 1, 2, 4, 8, 16], "prefetch_factor": [2, 4, 8], **axes}
    return sweep.grid_trials([DATA], sweep.Grid(**axes))


def test_durations_parse_with_units_and_refuse_nonsense():
    assert budget.parse_duration("300") == 300
    assert budget.parse_duration("90s") == 90 and budget.parse_duration("10m") == 600
    assert budget.parse_duration("1h") == 3600 and budget.parse_duration("1m30s") == 90
    for bad in ("ten minutes", "5x", "0", "-3m", ""):
        with pytest.raises(UserError, match="budget"):
            budget.parse_duration(bad)


def test_without_a_budget_the_plan_is_the_grid_and_says_how_long():
    trials = grid_trials()
    p = budget.make_plan(trials, OPTS)
    assert p.trials == trials and p.opts.repeats == 5 and not p.dropped
    assert p.trial_s == 5 * 5.0 + budget.TRIAL_OVERHEAD_S
    assert p.expected_s == len(trials) * p.trial_s
    assert p.describe().startswith(f"plan: {len(trials)} trials, 5 x 5 s repeats: about ")
    capped = budget.make_plan(trials, replace(OPTS, max_batches=6))  # a repeat may end at its 6th batch
    assert capped.describe().startswith(f"plan: {len(trials)} trials, 5 x 5 s repeats (or 6 batches): at most ")


def test_a_budget_drops_repeats_first_then_thins_prefetch_then_workers():
    trials = grid_trials()  # workers 0,1,2,4,8,16 x prefetch 2,4,8 = 16 trials; 30 s each = 8 min
    generous = budget.make_plan(trials, OPTS, budget_s=3600)
    assert generous.trials == budget.cut_order(trials) and not generous.dropped
    p = budget.make_plan(trials, OPTS, budget_s=360)  # 16 x 20 s at 3 repeats = 5.3 min: fits
    assert p.opts.repeats == 3 and p.dropped == ["repeats 5 -> 3"] and p.trials == budget.cut_order(trials)
    p = budget.make_plan(trials, OPTS, budget_s=120)  # 2 s repeats: 16 x 11 s, over; only prefetch 2: 6 trials
    assert p.opts.repeats == 3 and p.opts.repeat_seconds == budget.MIN_REPEAT_S and p.expected_s <= 120
    assert {c.prefetch_factor for _, c in p.trials} == {None, 2}
    assert {c.num_workers for _, c in p.trials} == {0, 1, 2, 4, 8, 16}
    assert p.dropped[2].startswith("prefetch factor: [2, 4, 8] -> [2]")
    p = budget.make_plan(trials, OPTS, budget_s=50)  # then every other worker count, the largest kept
    assert {c.num_workers for _, c in p.trials} == {1, 4, 16} and p.expected_s <= 50
    assert budget.make_plan(trials, OPTS, budget_s=1).trials  # never nothing


def test_a_model_keeps_part_of_the_budget_for_the_step_limits_and_confirmation():
    """Before the step is measured the plan counts guesses for it, the limits and each fed run of --confirm
    (sweep.run re-costs them from the step once measured); and so does a plan without a budget."""
    keep = budget.STEP_GUESS_S + budget.LIMITS_GUESS_S + 4 * budget.FED_GUESS_S
    p = budget.make_plan(grid_trials(), OPTS, budget_s=400, model=True, fed_runs=4)
    assert p.reserve_s == pytest.approx(keep) and p.loader_budget_s == pytest.approx(400 - keep)
    assert p.expected_s <= 400 and "for the model's step, the limits and --confirm" in p.describe()
    unbudgeted = budget.make_plan(grid_trials(), OPTS, model=True, fed_runs=4)
    assert unbudgeted.expected_s == pytest.approx(len(unbudgeted.trials) * unbudgeted.trial_s + keep)
    assert budget.make_plan(grid_trials(), OPTS, budget_s=100, model=True, fed_runs=4).reserve_s == 50  # half


def test_after_repeats_a_budget_shortens_them_down_to_two_seconds():
    p = budget.make_plan(grid_trials(), OPTS, budget_s=250)  # 16 x 20 s at 3 repeats: over; 3 x 3 s fits
    assert p.opts.repeats == 3 and p.dropped[:2] == ["repeats 5 -> 3", "repeat seconds 5 -> 3.5"]
    assert p.opts.repeat_seconds == pytest.approx((250 / 16 - budget.TRIAL_OVERHEAD_S) / 3) and len(p.trials) == 16


def test_finished_trials_replace_the_guess():
    done = [LoaderResult(repeat_s=[5.5] * 3, trial_s=3 * 5.5 + 2.0) for _ in range(3)]
    opts = replace(OPTS, repeats=3)
    assert budget.trial_seconds(opts) == 3 * 5.0 + budget.TRIAL_OVERHEAD_S
    assert budget.trial_seconds(opts, done) == pytest.approx(3 * 5.5 + 2.0)
    assert budget.trial_seconds(replace(opts, repeat_seconds=None)) == 3 * budget.EPOCH_GUESS_S + 5.0


def test_batch_sizes_thin_from_the_largest_down():
    grid = sweep.Grid(num_workers=[4], prefetch_factor=[2], batch_size=[32, 64, 128, 256])
    trials = sweep.grid_trials([DATA], grid)
    kept = budget.thin(trials, "batch_size")
    assert [c.batch_size for _, c in kept] == [64, 256]
    assert budget.thin(kept[:1], "batch_size") == kept[:1]
    assert isinstance(kept[0][1], LoaderConfig)


def test_cut_trials_are_kept_as_spares_the_last_cut_first():
    """What the budget cuts is kept, so a grid that finishes early can run it; the workers cut last come back
    before the prefetch values cut first."""
    trials = grid_trials()
    tight = budget.make_plan(trials, OPTS, budget_s=60)
    assert sorted(c.key() for _, c in tight.trials + tight.spare) == sorted(c.key() for _, c in trials)
    cut = [d for d in tight.dropped if not d.startswith("repeat")]
    assert cut[0].startswith("prefetch") and cut[-1].startswith(("num workers", "the last"))
    assert tight.spare[0][1].prefetch_factor in (None, 2) and tight.spare[-1][1].prefetch_factor in (4, 8)


STEP = StepResult(batch_size=32, samples_per_s=1000.0)
SOPTS = StepOptions(warmup=3, steps=10, repeats=3)  # 33 steps a measurement


def test_a_fed_run_costs_its_queued_warm_up_and_timed_steps_at_the_slower_rate():
    """e2e raises the warm-up to the batches the workers queue ahead: 16 workers x prefetch 8 = 128 batches,
    then 20 x 3 timed steps, 188 batches of 32 at the step's 1,000 samples/s = 6.016 s, plus the fixed part."""
    cfg = LoaderConfig(batch_size=32, num_workers=16, prefetch_factor=8)
    assert budget.fed_run_s(cfg, STEP, 20, 3, 3) == pytest.approx(budget.FED_OVERHEAD_S + 6.016)
    # a loader slower than the step sets the pace; its start-up is added
    assert budget.fed_run_s(cfg, STEP, 20, 3, 3, loader_samples_per_s=500.0, startup_s=2.0) == pytest.approx(
        budget.FED_OVERHEAD_S + 2.0 + 12.032)
    # no workers: the warm-up is the asked 3 steps
    assert budget.fed_run_s(LoaderConfig(batch_size=32), STEP, 20, 3, 3) == pytest.approx(
        budget.FED_OVERHEAD_S + 63 * 0.032)
    # an epoch near the run (2,016 samples: 63 steps of 32): the run is one whole epoch, 63 timed steps
    assert budget.fed_run_s(LoaderConfig(batch_size=32), STEP, 20, 3, 3, epoch_samples=2016) == pytest.approx(
        budget.FED_OVERHEAD_S + 66 * 0.032)


def test_after_the_grid_the_limits_and_every_confirm_run_are_kept():
    trials = grid_trials(batch_size=[32])  # the largest queue: 16 workers x prefetch 8
    one = budget.fed_run_s(LoaderConfig(batch_size=32, num_workers=16, prefetch_factor=8), STEP, 20, 3, 3)
    assert budget.after_grid_s(STEP, trials, 2, 2, 20, 3, 3, SOPTS) == pytest.approx(budget.LIMITS_GUESS_S + 4 * one)
    assert budget.after_grid_s(STEP, trials, 0, 0, 0, 0, 0, SOPTS) == budget.LIMITS_GUESS_S


def test_confirm_fits_the_time_left_fewer_configs_down_to_two_then_fewer_rounds_then_one_then_none():
    runs = [10.0, 20.0]  # one run of each candidate, in the order they are fed
    assert budget.fit_confirm(runs, 2, 60) == budget.ConfirmFit(2, 2, 60.0, None)
    fit = budget.fit_confirm(runs, 2, 59)  # 2 x 2 = 60 s: no; 2 configs once each = 30 s, before 1 twice
    assert (fit.k, fit.rounds, fit.expected_s) == (2, 1, 30.0)
    assert fit.cut == "confirm: 2 configs x 2 rounds -> 2 x 1 (about 30 s of the 59 s left)"
    assert (budget.fit_confirm(runs, 2, 29).k, budget.fit_confirm(runs, 2, 29).rounds) == (1, 2)
    assert (budget.fit_confirm(runs, 2, 15).k, budget.fit_confirm(runs, 2, 15).rounds) == (1, 1)
    three = budget.fit_confirm([10.0, 10.0, 10.0], 2, 45)  # 3 x 2 = 60, 2 x 2 = 40: two configs kept twice
    assert (three.k, three.rounds) == (2, 2)
    none = budget.fit_confirm(runs, 2, 5)
    assert (none.k, none.rounds) == (0, 0) and "-> none" in none.cut and "5 s left" in none.cut
    assert budget.fit_confirm(runs, 2, -3).cut.endswith("does not fit the 0 s left")


def test_under_a_budget_trials_run_in_the_order_thinning_would_keep_them():
    """A deadline stops the grid at its last trials: in the grid's order those are the largest worker counts,
    which most often decide the pick. In cut_order the survivors of thinning come first (workers 16, then 1,
    then 4: every other value from the largest, round after round), prefetch 2 before 4 and 8, and what the plan
    itself would drop next comes last; among what one step drops, the larger worker counts first (8, 2, 0).
    Without a budget the grid's order stands."""
    trials = grid_trials()  # workers 0,1,2,4,8,16 x prefetch 2,4,8
    order = [(c.num_workers, c.prefetch_factor) for _, c in budget.cut_order(trials)]
    assert order[:6] == [(16, 2), (1, 2), (4, 2), (8, 2), (2, 2), (0, None)]
    assert sorted(order) == sorted((c.num_workers, c.prefetch_factor) for _, c in trials)
    assert all(pf in (4, 8) for _, pf in order[6:])
    assert budget.make_plan(trials, OPTS).trials == trials
    p = budget.make_plan(trials, OPTS, budget_s=40)  # 3 trials of 11 s fit: the three thinning keeps longest
    assert [(c.num_workers, c.prefetch_factor) for _, c in p.trials] == [(16, 2), (1, 2), (4, 2)]
    # the 16-core ladder: a deadline after six trials has run 12 workers, not 1
    h200 = grid_trials(num_workers=[0, 1, 2, 3, 4, 6, 8, 12, 16], prefetch_factor=[2])
    assert [c.num_workers for _, c in budget.cut_order(h200)] == [16, 0, 4, 8, 2, 12, 6, 3, 1]


def test_a_candidate_without_a_start_up_figure_costs_none_and_other_batch_sizes_cost_a_step():
    """An older record has no startup_s_median (NaN): it must not make every fed run cost NaN, which no time
    left would fit. A candidate at a batch size other than the model's step costs one more step measured alone
    (model built, then warm-up + timed steps), once per batch size."""
    cfg = LoaderConfig(batch_size=32, num_workers=16, prefetch_factor=8)
    assert budget.fed_run_s(cfg, STEP, 20, 3, 3, 500.0, float("nan")) == budget.fed_run_s(cfg, STEP, 20, 3, 3, 500.0)
    assert budget.fit_confirm([budget.fed_run_s(cfg, STEP, 20, 3, 3, 500.0, float("nan"))], 2, 1e9).k == 1
    assert budget.step_remeasure_s(64, STEP, SOPTS) == pytest.approx(budget.FED_OVERHEAD_S + 33 * 64 / 1000)
    fit = budget.fit_confirm([10.0, 10.0], 2, 45, once_s=[0.0, 10.0])  # 2 x 20 + 10 = 50 s: no; 2 x 10 + 10
    assert (fit.k, fit.rounds) == (2, 1) and budget.fit_confirm([10.0, 10.0], 2, 50, once_s=[0.0, 10.0]).rounds == 2
    assert (budget.fit_confirm([10.0, 10.0], 2, 25, once_s=[0.0, 10.0]).k) == 1  # 30 s: no; 1 x 2 = 20 s
    trials = grid_trials(batch_size=[32, 64])
    one = budget.fed_run_s(LoaderConfig(batch_size=64, num_workers=16, prefetch_factor=8), STEP, 20, 3, 3)
    assert budget.after_grid_s(STEP, trials, 2, 2, 20, 3, 3, SOPTS) == pytest.approx(
        budget.LIMITS_GUESS_S + 4 * one + budget.step_remeasure_s(64, STEP, SOPTS))
