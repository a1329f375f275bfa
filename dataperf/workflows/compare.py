"""Base vs head over saved result files: medians, percent change, and a noise-aware verdict for CI gates.

The verdict is read off the interval that is printed: a 95% bootstrap interval of the percent change of
medians. A regression is a change whose whole interval lies beyond the threshold on the worse side; an
interval inside +-threshold is "unchanged"; anything else is "within noise". With fewer than MIN_REPEATS
repeats a side the bootstrap is degenerate, so no verdict is given ("too few repeats").
benchmarks/compare_noise.py measures the false-alarm rate and the smallest slowdown detected.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path

from dataperf import results
from dataperf.errors import UserError

# metric name -> (field holding every repeat, per record kind), and whether higher is better
METRICS: dict[str, tuple[dict[str, str], bool]] = {
    "samples_per_s": ({"loader": "samples_per_s_repeats", "step": "samples_per_s_repeats",
                       "e2e": "samples_per_s_repeats", "watch": "samples_per_s_repeats"}, True),
    "step_ms": ({"step": "step_ms_repeats", "e2e": "step_ms_repeats", "watch": "step_ms_repeats"}, False),
    "peak_mem_mib": ({"step": "peak_mem_mib_repeats"}, False),
    "payload_mib_s": ({"loader": "payload_mib_s_repeats"}, True),
    "storage_read_mib_s": ({"loader": "storage_read_mib_s_repeats"}, True),
    "repeat_samples_per_s": ({"loader": "repeat_samples_per_s_repeats"}, True),
    "data_stall_fraction": ({"e2e": "data_stall_fraction_repeats", "watch": "data_stall_fraction_repeats"}, False),
}
# a metric's name before schema 4 (a repeat's rate was called the epoch's), still accepted from old command lines
METRIC_ALIASES = {"epoch_samples_per_s": "repeat_samples_per_s"}


@dataclass
class Change:
    kind: str
    config: str
    metric: str
    base_median: float
    head_median: float
    change_pct: float
    ci_pct: tuple[float, float]
    verdict: str  # regression | improvement | within noise | unchanged | too few repeats


def parse_threshold(text: str) -> float:
    t = text.strip().rstrip("%")
    try:
        v = float(t)
    except ValueError:
        raise UserError(f"--threshold must be a percentage like 5% or 5, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise UserError(f"--threshold must be a finite, non-negative percentage, got {text!r}")
    return v


MIN_REPEATS = 5


def bootstrap_ci_pct(base: list[float], head: list[float], n: int = 4000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of the percent change of medians (resampling each side's repeats)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = statistics.median(rng.choices(base, k=len(base)))
        h = statistics.median(rng.choices(head, k=len(head)))
        out.append(pct_change(b, h))
    out.sort()
    return out[int(0.025 * n)], out[int(0.975 * n) - 1]


def pct_change(b: float, h: float) -> float:
    """Percent change of h over b; from a zero base any change is infinite, not "+0.0%"."""
    if b:
        return (h - b) / b * 100
    return 0.0 if h == b else math.copysign(math.inf, h - b)


def judge(base: list[float], head: list[float], higher_better: bool, threshold_pct: float) -> tuple:
    """(base median, head median, % change, 95% CI of the % change, verdict) -- the verdict from that CI."""
    b, h = statistics.median(base), statistics.median(head)
    pct = pct_change(b, h)
    lo, hi = ci = bootstrap_ci_pct(base, head)
    if min(len(base), len(head)) < MIN_REPEATS:
        verdict = "too few repeats"
    elif lo > threshold_pct or hi < -threshold_pct:
        up = lo > threshold_pct  # the whole interval is above +threshold (or below -threshold)
        verdict = "improvement" if up == higher_better else "regression"
    elif -threshold_pct <= lo and hi <= threshold_pct:
        verdict = "unchanged"
    else:
        verdict = "within noise"
    return b, h, pct, ci, verdict


def _label(r: results.Record) -> str:
    if isinstance(r, results.TrialRecord) and r.config.get("backend"):
        return r.loader_config.short()
    return r.config_key or getattr(r, "model", "")


def pooled(path: Path) -> dict[tuple[str, str], tuple[object, dict[str, list[float]]]]:
    """Records by (kind, config); several runs of one config pool their repeats, so run-to-run drift (other
    load, clocks, cache state) counts as noise instead of hiding behind one run's tight repeats."""
    out: dict[tuple[str, str], tuple[object, dict[str, list[float]]]] = {}
    for r in results.load(path):
        if r.status != "ok" or not hasattr(r, "config_key"):  # unpaired kinds: named by `unpaired`
            continue
        key = (r.kind, r.config_key)
        _, reps = out.setdefault(key, (r, {}))
        for fields, _ in METRICS.values():
            f = fields.get(r.kind)
            if f and getattr(r, f, None):
                reps.setdefault(f, []).extend(getattr(r, f))
    return out


def unpaired(path: Path) -> dict[str, int]:
    """Records compare cannot pair between base and head, by kind (a memory record has no config key: one per
    optimizer and batch size, with no repeats to judge): skipped, and the command says so."""
    out: dict[str, int] = {}
    for r in results.load(path):
        if not hasattr(r, "config_key"):
            out[r.kind] = out.get(r.kind, 0) + 1
    return out


def compare(base_path: Path, head_path: Path, metrics: list[str], threshold_pct: float) -> list[Change]:
    metrics = [METRIC_ALIASES.get(m, m) for m in metrics]
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise UserError(f"unknown metric(s) {unknown}; choose from {', '.join(METRICS)}")
    base, head = pooled(base_path), pooled(head_path)
    matched = sorted(set(base) & set(head))
    skipped = sorted(set(unpaired(base_path)) | set(unpaired(head_path)))
    if not matched and skipped and not (base or head):
        raise UserError(f"{', '.join(skipped)} records carry no metric compare can judge (it compares repeats of "
                        f"{', '.join(_judged_kinds())} results); compare files of those, e.g. from bench or "
                        "sweep --out")
    if not matched:
        watched = any(k == "watch" for k, _ in base) and any(k == "watch" for k, _ in head)
        fix = ("a watch record is matched by its job's name, the command line unless --label gives one: watch "
               "both runs with the same --label (dataperf watch --label myjob -- python train.py)" if watched else
               "run the same configs (same seed, same options) for base and head")
        raise UserError(f"no configuration appears in both {base_path} and {head_path}; {fix}")
    out = []
    for key in matched:
        (b, b_reps), (_, h_reps) = base[key], head[key]
        for m in metrics:
            fields, higher = METRICS[m]
            f = fields.get(key[0])
            if f is None:
                continue
            bv, hv = b_reps.get(f), h_reps.get(f)
            if not bv or not hv:
                continue
            bm, hm, pct, ci, verdict = judge(bv, hv, higher, threshold_pct)
            out.append(Change(key[0], _label(b), m, bm, hm, pct, ci, verdict))
    if not out:
        kinds = sorted({k for k, _ in matched})
        measured = [m for m, (f, _) in METRICS.items() if set(f) & set(kinds)]
        if not measured:  # lengths, profile, diagnose, limits records: figures, but none in repeats
            raise UserError(f"{', '.join(kinds)} records carry no metric compare can judge (it compares repeats "
                            f"of {', '.join(_judged_kinds())} results); compare files of those, e.g. from bench or "
                            "sweep --out")
        raise UserError(f"none of the metrics {metrics} is measured by the matched records ({', '.join(kinds)}); "
                        "choose from " + ", ".join(measured))
    return out


def _judged_kinds() -> list[str]:
    """The record kinds whose repeats compare judges."""
    return sorted({k for f, _ in METRICS.values() for k in f})


def has_regression(changes: list[Change]) -> bool:
    return any(c.verdict == "regression" for c in changes)


def env_differences(base_path: Path, head_path: Path) -> list[tuple[str, object, object]]:
    """Provenance keys (machine, versions, filesystem) in which base and head differ: figures measured on
    different machines or software are not a like-for-like comparison, whatever the verdict says."""
    from dataperf.results import provenance

    def first_env(path: Path) -> dict:
        return next((r.env for r in results.load(path) if r.env), {})

    return provenance.differences(first_env(base_path), first_env(head_path))
