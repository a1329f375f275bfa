"""dataperf memory: option handling, the reduction figure, the max-batch search and the OOM path, on CPU."""

import json

import pytest
import torch
from click.testing import CliRunner

from dataperf import results
from dataperf.cli import cli
from dataperf.errors import UserError
from dataperf.measure.models import load_model
from dataperf.measure.zero import CHOICES, ds_config
from dataperf.workflows.memory import _run_trial, measure_memory, reduction_pct, search_max_batch, subprocess_trial

BASE = {"model": "gpt-tiny", "batch_size": 4, "seq_len": 8, "device": "cpu", "amp": None, "repeats": 1,
        "steps": 1, "warmup": 1}


def test_reduction_pct():
    assert reduction_pct(1000.0, 400.0) == pytest.approx(60.0)
    assert reduction_pct(1000.0, 1200.0) == pytest.approx(-20.0)
    assert reduction_pct(None, 400.0) is None and reduction_pct(1000.0, None) is None


@pytest.mark.parametrize("limit_fit,start,limit", [(37, 4, 1024), (1, 4, 1024), (4, 4, 1024), (500, 8, 256),
                                                    (0, 4, 64), (100, 100, 100)])
def test_max_batch_search_finds_exact_largest(limit_fit, start, limit):
    best, tried = search_max_batch(lambda b: b <= limit_fit, start, limit)
    assert best == min(limit_fit, limit)
    assert len(tried) == len(set(tried))  # never measures a batch twice
    assert all(b <= limit for b in tried)


def test_max_batch_search_doubles_then_bisects_within_tolerance():
    best, tried = search_max_batch(lambda b: b <= 100, 8, 1024, tolerance_pct=10)
    assert tried[:5] == [8, 16, 32, 64, 128]
    assert 100 - 100 * 0.1 <= best <= 100


def test_max_batch_search_rejects_bad_start():
    with pytest.raises(UserError):
        search_max_batch(lambda b: True, 0, 16)


def fake_trial(mib_per_sample: dict[str, float], state_mib: dict[str, float], gpu_mib: float):
    """A trial whose memory is analytic: state + batch * activations; over gpu_mib it is an OOM."""
    calls = []

    def trial(opts):
        calls.append(opts)
        o, b = opts["optimizer"], opts["batch_size"]
        mib = state_mib[o] + b * mib_per_sample[o]
        if o == "broken":
            return {"status": "failed", "error": "DeepSpeed exploded"}
        if mib > gpu_mib:
            return {"status": "oom", "error": "CUDA out of memory", "oom_summary": f"/r/oom-{o}-bs{b}.txt"}
        return {"status": "ok", "step": {"params_m": 1.0, "step_ms_median": 10.0, "samples_per_s": b / 0.01,
                                         "cuda_max_allocated_mib": mib, "nvml_peak_used_mib": mib + 500,
                                         "notes": []}}
    return trial, calls


def test_table_reductions_max_batch_and_oom_file():
    trial, calls = fake_trial({"adamw": 10, "adam8bit": 10, "zero3-offload": 10},
                              {"adamw": 1600, "adam8bit": 700, "zero3-offload": 100}, gpu_mib=2000)
    seen = []
    rows = measure_memory(BASE, ["adamw", "adam8bit", "zero3-offload"], max_batch=True, tolerance_pct=0,
                          trial=trial, on_result=seen.append)
    by = {r.optimizer: r for r in rows}
    assert by["adamw"].reduction_vs_adamw_pct == pytest.approx(0.0)
    assert by["adam8bit"].reduction_vs_adamw_pct == pytest.approx((1 - 740 / 1640) * 100)
    assert by["adamw"].max_batch == 40 and by["adam8bit"].max_batch == 130 and by["zero3-offload"].max_batch == 190
    assert by["adamw"].oom_summary == "/r/oom-adamw-bs41.txt" or by["adamw"].oom_summary.startswith("/r/oom-adamw")
    assert [r.optimizer for r in seen] == ["adamw", "adam8bit", "zero3-offload"]
    assert all(c["nvml_interval_s"] == 1.0 for c in calls)
    search = [c for c in calls if c["repeats"] == 1 and c["steps"] == 2]
    assert search and all(c["optimizer"] in by for c in search)


def test_failed_optimizer_is_a_failed_row_not_a_crash():
    trial, _ = fake_trial({"adamw": 1, "broken": 1}, {"adamw": 10, "broken": 10}, gpu_mib=100)
    rows = measure_memory(BASE, ["broken", "adamw"], max_batch=True, trial=trial)
    assert rows[0].status == "failed" and "exploded" in rows[0].error and rows[0].max_batch is None
    assert rows[0].reduction_vs_adamw_pct is None and rows[1].status == "ok"


def test_no_adamw_row_means_no_reduction():
    trial, _ = fake_trial({"adam8bit": 1}, {"adam8bit": 10}, gpu_mib=100)
    assert measure_memory(BASE, ["adam8bit"], trial=trial)[0].reduction_vs_adamw_pct is None


def test_records_round_trip_and_report(tmp_path):
    trial, _ = fake_trial({"adamw": 1, "adam8bit": 1}, {"adamw": 20, "adam8bit": 8}, gpu_mib=100)
    out = tmp_path / "m.jsonl"
    measure_memory(BASE, ["adamw", "adam8bit"], trial=trial, on_result=lambda r: results.append(out, r))
    recs = results.load(out)
    assert [r.kind for r in recs] == ["memory", "memory"]
    assert recs[1].reduction_vs_adamw_pct == pytest.approx((1 - 12 / 24) * 100)
    r = CliRunner().invoke(cli, ["report", str(out)])
    assert r.exit_code == 0, r.output
    assert "adam8bit" in r.output and "+50.0%" in r.output


@pytest.mark.slow
def test_trial_process_measures_a_real_step():
    got = subprocess_trial(dict(BASE, optimizer="adamw"))
    assert got["status"] == "ok", got
    assert got["step"]["params_m"] > 0 and got["step"]["step_ms_median"] > 0


def test_trial_reports_oom_with_its_summary_file(tmp_path, monkeypatch):
    import dataperf.measure.step as step

    def oom(opts):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 10 bytes")

    monkeypatch.setattr(step, "_measure_step", oom)
    got = _run_trial(dict(BASE, optimizer="adamw", results_dir=str(tmp_path)))
    assert got["status"] == "oom"
    assert (tmp_path / "oom-gpt-tiny-adamw-bs4.txt").is_file() and got["oom_summary"].endswith("bs4.txt")


def test_trial_reports_user_error_as_failed():
    got = _run_trial(dict(BASE, optimizer="zero2"))
    assert got["status"] == "failed" and "CUDA" in got["error"]


@pytest.mark.parametrize("args,msg", [
    (["--optimizers", "adamw,nope"], "unknown optimizer 'nope'"),
    (["--device", "cpu"], "--device cpu has none"),
    ([], "torch sees no CUDA"),
])
def test_memory_cli_errors_are_one_line(args, msg):
    if not args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = CliRunner().invoke(cli, ["memory", *args])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and msg in lines[0]


def test_zero_choices_on_cpu_say_cuda_needed():
    r = CliRunner().invoke(cli, ["step", "--model", "gpt-tiny", "--optimizer", "zero3-offload", "--seq-len", "8",
                                 "--batch-size", "1"], env={"DS_ACCELERATOR": ""})
    assert r.exit_code == 2 and r.output.startswith("error:") and "cuda" in r.output


@pytest.mark.parametrize("name", list(CHOICES))
def test_ds_config_per_choice(name):
    stage, off_opt, off_param, client = CHOICES[name]
    c = ds_config(name, 16, True)
    zo = c["zero_optimization"]
    assert zo["stage"] == stage and c["train_micro_batch_size_per_gpu"] == 16 and c["bf16"]["enabled"]
    assert ("offload_optimizer" in zo) == off_opt and ("offload_param" in zo) == off_param
    assert c["zero_allow_untested_optimizer"] == (client == "adam8bit")
    json.dumps(c)  # DeepSpeed takes it as JSON-able dict


def test_gpt_1_3b_has_about_1_3b_parameters():
    with torch.device("meta"):
        m = load_model("gpt-1.3b")
    n = sum(p.numel() for p in m.parameters())
    assert 1.25e9 < n < 1.45e9
