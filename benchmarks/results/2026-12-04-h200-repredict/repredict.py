"""Offline: the fed-rate predictor at a given tree, re-run on the loader trials and steps the H200 recorded on
2026-12-04 (pick_quality-4 and -5), against the whole-epoch truth grid of -4 (pinned configs, fed, pooled).
No new measurement: the same records, the predictor changed; their flow rate (recorded from 3a08c37 on) is
approximated from the repeats' samples and times. Those records hold no copy timing (the step's h2d
fields came later), so the model's rate is the step alone: pinned copies are about 3 ms of a 116 ms step.
Run from the repository root: python benchmarks/results/2026-12-04-h200-repredict/repredict.py"""

from dataclasses import replace
from pathlib import Path

from dataperf import records, verdict
from dataperf.records import E2EResult, LoaderResult, StepResult

R = Path("benchmarks/results")
truth: dict[tuple[int, bool], list[E2EResult]] = {}
for r in records.load(R / "2026-12-04-h200-pick_quality-4/run/truth.jsonl"):
    if isinstance(r, E2EResult) and r.status == "ok" and r.config["pin_memory"]:  # the grid (not its sizing probes)
        truth.setdefault((r.config["num_workers"], r.config["persistent_workers"]), []).append(r)
rate = {k: sum(sum(x.timed_steps()) * x.batch_size for x in v) / sum(verdict.run_wall_s(x) for x in v)
        for k, v in truth.items()}
errs = []
for src in ("2026-12-04-h200-pick_quality-4/run/sweep.jsonl", "2026-12-04-h200-pick_quality-4/run/budget.jsonl",
            "2026-12-04-h200-pick_quality-4/run/tune.jsonl", "2026-12-04-h200-pick_quality-5/run/budget.jsonl"):
    p = R / src
    if not p.exists():
        continue
    recs = records.load(p)
    step = next(r for r in recs if isinstance(r, StepResult))
    for t in (r for r in recs if isinstance(r, LoaderResult) and r.status == "ok"):
        w = t.config["num_workers"]
        if t.flow_samples_per_s_median != t.flow_samples_per_s_median:  # recorded before the flow rate was
            # its repeats' samples after the first round over their time after the median time to first batch
            # (each of these repeats ended at a whole round: every worker's third batch)
            flows = sorted((n - w * t.config["batch_size"]) / (s - t.ttfb_s_median)
                           for n, s in zip(t.repeat_samples, t.repeat_s, strict=True))
            t.flow_samples_per_s_median = flows[len(flows) // 2]
        for persistent in (False, True):
            if (w, persistent) not in rate or t.config.get("prefetch_factor") != 2:
                continue
            cfg = replace(t.loader_config, pin_memory=True, persistent_workers=persistent)
            new = verdict.predicted_fed(t, step, cfg)
            e = (new / rate[(w, persistent)] - 1) * 100
            errs.append(abs(e))
            print(f"{src.split('/')[0][-1]}:{Path(src).stem:6s} w={w:2d} persistent={persistent!s:5s} "
                  f"ttfb {t.ttfb_s_median:.2f} s, steady {t.samples_per_s_median:,.0f} "
                  f"({'valid' if t.steady_valid else 'not valid'}), flow {t.flow_samples_per_s_median:,.0f}: "
                  f"predicted {new:,.0f} "
                  f"against fed {rate[(w, persistent)]:,.0f} ({e:+.1f}%)")
print(f"MAPE {sum(errs) / len(errs):.1f}% over {len(errs)} predictions")
