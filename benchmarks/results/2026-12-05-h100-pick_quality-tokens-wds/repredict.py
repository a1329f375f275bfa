"""Offline (issue 26): predicted_fed of the wds-uneven sweep's trials, as recorded, against the fed runs of the same lease
(truth.jsonl: the pinned grid runs and the unpinned window probes, few steps, not whole epochs; extra.jsonl). Run with
the package on PYTHONPATH: PYTHONPATH=. python benchmarks/results/2026-12-05-h100-pick_quality-tokens-wds/repredict.py"""
import json, sys
from dataclasses import replace
from dataperf import results, verdict
from dataperf.verdict import rates
from dataperf.results import LoaderResult, StepResult, E2EResult
D = __import__("os").path.dirname(__file__) + "/wds/"
recs = results.load(D + "sweep.jsonl")
step = [r for r in recs if isinstance(r, StepResult)][-1]
trials = {r.config["num_workers"]: r for r in recs if isinstance(r, LoaderResult) and r.status == "ok" and r.config.get("prefetch_factor") in (2, None)}
truth = {}
for l in open(D + "truth.jsonl"):
    r = json.loads(l); c = r["config"]
    truth.setdefault((c["num_workers"], c["pin_memory"], c["persistent_workers"], c.get("prefetch_factor")), []).append(r["samples_per_s"])
for l in open(D + "extra.jsonl"):
    r = json.loads(l); c = r["config"]
    truth.setdefault((c["num_workers"], c["pin_memory"], c["persistent_workers"], c.get("prefetch_factor")), []).append(r["samples_per_s"])
print("step", step.samples_per_s, "batch", step.batch_size)
for (w, pin, per, pf), v in sorted(truth.items()):
    t = trials.get(w)
    if t is None: print(w, "no trial"); continue
    cfg = replace(t.loader_config, pin_memory=pin, persistent_workers=per, prefetch_factor=pf)
    p = verdict.predicted_fed(t, step, cfg)
    m = sum(v)/len(v)
    print(f"w={w} pin={pin} persist={per} pf={pf}: truth {m:,.0f} (runs {', '.join(f'{x:,.0f}' for x in v)}) predicted {p:,.0f} ({(p-m)/m*100:+.1f}%)  repeat {t.repeat_samples_per_s_median:,.0f} flow {t.flow_samples_per_s_median} steady_valid {t.steady_valid} start {t.startup_s_median:.2f} loads {sorted(set(round(x) for x in t.epoch_worker_samples))}")
