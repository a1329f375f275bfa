"""benchmarks/real_scripts.py's reading of the public script's step lines and its scoring, on lines printed in the
script's own format for steps whose times are chosen here (no GPU, nothing timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import real_scripts as rs  # noqa: E402

from dataperf.results import DecisionResult  # noqa: E402


def line(epoch: int, i: int, of: int, t: float, d: float) -> str:
    """What pytorch/examples imagenet/main.py's ProgressMeter.display prints (its format strings, copied)."""
    digits = len(str(of))
    head = f"Epoch: [{epoch}]" + "[" + f"{i:{digits}d}" + "/" + f"{of:{digits}d}" + "]"
    return "\t".join([head, f"Time {t:6.3f} ({t:6.3f})", f"Data {d:6.3f} ({d:6.3f})", "Loss 6.9e+00 (6.9e+00)",
                      "Acc@1   0.00 (  0.00)", "Acc@5   0.39 (  0.39)"])


def epoch_lines(epoch: int, times: list[tuple[float, float]]) -> list[str]:
    return [line(epoch, i + 1, len(times), t, d) for i, (t, d) in enumerate(times)]


# 10 steps of batch 100 over 950 samples (the last holds 50): 2 start steps (workers=2) of 1.0 s with 0.9 s of
# data wait, then 8 steady steps of 0.1 s with 0.01 s of wait
EPOCH = [(1.0, 0.9), (1.0, 0.9)] + [(0.1, 0.01)] * 8


def test_step_lines_are_read_as_the_script_prints_them():
    text = "\n".join(["=> creating model 'resnet50'", *epoch_lines(0, EPOCH), "Test: [1/1]\tTime  0.100",
                      *epoch_lines(1, EPOCH)])
    steps = rs.parse_steps(text)
    assert len(steps) == 20 and steps[0].epoch == 0 and steps[-1].epoch == 1
    assert (steps[2].index, steps[2].of, steps[2].time_s, steps[2].data_s) == (3, 10, 0.1, 0.01)


def test_an_epoch_splits_into_its_start_window_and_steady_steps():
    e = rs.epoch_figures(rs.parse_steps("\n".join(epoch_lines(1, EPOCH))), 1, 100, 950, workers=2)
    # steady: 7 full batches and the last of 50 in 0.8 s
    assert e.steady_samples_per_s == pytest.approx(750 / 0.8)
    assert e.steady_data_wait_fraction == pytest.approx(0.1)
    # the window: 2.0 s for 200 samples that the steady rate takes 200 / 937.5 s for
    assert e.start_cost_s == pytest.approx(2.0 - 200 / (750 / 0.8))
    assert e.samples_per_s == pytest.approx(950 / 2.8)
    assert e.data_wait_fraction == pytest.approx((1.8 + 0.08) / 2.8)


def test_a_missing_step_line_is_refused_not_averaged_over():
    lines = epoch_lines(1, EPOCH)
    with pytest.raises(ValueError, match="-p 1"):
        rs.epoch_figures(rs.parse_steps("\n".join(lines[:3] + lines[4:])), 1, 100, 950, workers=2)


def run_at(w: int, steady: float, wait: float, cost: float) -> rs.ScriptRun:
    e = rs.EpochFigures(1, 10, 950, steady * 0.8, wait, steady, wait, max(w, 1), cost)
    return rs.ScriptRun(w, 0, 0, 30.0, [e])


def test_score_holds_the_decision_against_the_script_at_its_pick():
    d = DecisionResult(config={"num_workers": 4, "prefetch_factor": 2, "pin_memory": True,
                               "persistent_workers": False}, input_bound=False, steady_samples_per_s=1030.0,
                       step_samples_per_s=1040.0,
                       epoch_start_s=1.5, predictions=[
                           {"kind": "fed", "config": {"num_workers": 4, "prefetch_factor": 2}, "predicted": 1100.0},
                           {"kind": "fed", "config": {"num_workers": 8, "prefetch_factor": 2}, "predicted": 1000.0},
                           {"kind": "fed", "config": {"num_workers": 8, "prefetch_factor": 4}, "predicted": 1.0}])
    s = rs.score(d, None, [run_at(4, 1000.0, 0.01, 1.2), run_at(8, 1040.0, 0.0, 2.0)])
    assert s["steady_ratio"] == pytest.approx(1.03) and s["steady_met"]
    # the script 3.8% short of the model alone: fed, as the decision says
    assert s["verdict_met"] and not s["script_input_bound"]
    assert s["start_met"] is False  # 1.5 s said, 1.2 s paid: 25% off
    assert s["pick_ratio"] == pytest.approx(1000 / 1040) and s["pick_met"]
    # against the whole 2nd epochs; the prefetch-4 prediction is not a config the script runs
    assert s["mape_n"] == 2 and s["mape_pct"] == pytest.approx((abs(1100 / 800 - 1) + abs(1000 / 832 - 1)) * 50)


def test_a_wrong_verdict_and_a_slow_pick_are_not_met():
    d = DecisionResult(config={"num_workers": 2, "persistent_workers": False}, input_bound=False,
                       steady_samples_per_s=500.0, epoch_start_s=1.0, step_samples_per_s=1000.0)
    s = rs.score(d, None, [run_at(2, 500.0, 0.3, 1.0), run_at(8, 1000.0, 0.0, 1.0)])
    assert s["verdict_met"] is False and s["script_input_bound"]
    assert s["pick_met"] is False and s["pick_ratio"] == pytest.approx(0.5)


def test_every_epoch_after_the_first_is_read_and_scored_with_each_start_kept(tmp_path):
    """Three epochs printed: the 2nd and 3rd are scored (averaged), each one's start cost listed: one epoch start
    a config is one reading, and two show its spread."""
    slow_start = [(1.5, 1.4), (1.0, 0.9)] + [(0.1, 0.01)] * 8  # 0.5 s more at the 3rd epoch's start
    log = tmp_path / "script-w2-0.log"
    log.write_text("\n".join([*epoch_lines(0, EPOCH), *epoch_lines(1, EPOCH), *epoch_lines(2, slow_start)]))
    r = rs.read_run(rs.ScriptRun(2, 0, 0, 10.0), log, 100, 950)
    assert [e.epoch for e in r.later] == [1, 2] and not r.error
    cost = 2.0 - 200 / (750 / 0.8)
    d = DecisionResult(config={"num_workers": 2}, input_bound=False, steady_samples_per_s=937.5,
                       step_samples_per_s=1000.0, epoch_start_s=cost + 0.25)
    s = rs.score(d, None, [r])
    assert s["script_start_costs_s"] == [pytest.approx(cost, abs=1e-3), pytest.approx(cost + 0.5, abs=1e-3)]
    assert s["script_start_cost_s"] == pytest.approx(cost + 0.25) and s["start_met"]
    assert s["script_steady_at_pick"] == pytest.approx(750 / 0.8)
