"""What a table of trials cannot show by itself: workers that read nothing, and what the loader-vs-step verdict
cannot see. Each is one line for whoever shows the table (sweep, report)."""

from __future__ import annotations

from dataperf.results import E2EResult, Record, StepResult
from dataperf.verdict.rates import finite, machine_cores, ok_loaders

LOADED = 0.25  # other processes taking this share of the cores during a trial make its rate theirs too
STEP_SLOW = 1.1  # a fed run this much faster than the step alone: the step alone read slow


def idle_warning(results: list[Record]) -> str | None:
    """One line for a whole table: trials whose workers were partly idle, and the fix."""
    idle = [r for r in ok_loaders(results) if r.active_workers is not None
            and r.active_workers < r.config.get("num_workers", 0)]
    if not idle:
        return None
    worst = max(r.config["num_workers"] * max(r.world_size, 1) for r in idle)
    shards = {r.shards for r in idle if r.shards is not None}
    if not shards:  # no tar shards (Parquet row groups, a user's IterableDataset): each trial's note names its fix
        return (f"warning: idle workers in {len(idle)} trial(s): more workers than the data's units of work left "
                "some reading nothing; their rates are limited by that, not the workers (each trial's note names "
                "the fix)")
    return (f"warning: idle workers in {len(idle)} trial(s): more workers than shards ({sorted(shards)} shards) "
            f"left some reading nothing; their rates are shard-limited. Reshard to at least {worst} shards "
            f"(workers x ranks): dataperf shards convert SRC OUT --shards {worst}")


def loaded_warning(results: list[Record]) -> str | None:
    """One line where other processes took a share of the cores during the trials (the 2026-12-06 audit's S1a:
    w=2 fed 44 samples/s beside a neighbour's load against 92-99 quiet, and the pick followed the load)."""
    ok = [r for r in ok_loaders(results) if finite(r.other_cores_busy_median)]
    cores = machine_cores(ok[0]) if ok else 1
    loaded = [r for r in ok if r.other_cores_busy_median >= max(LOADED * cores, 0.5)]
    if not loaded:
        return None
    worst = max(loaded, key=lambda r: r.other_cores_busy_median)
    return (f"warning: other processes kept {worst.other_cores_busy_median:.1f} of the {cores} cores busy during "
            f"{worst.loader_config.short()} ({len(loaded)} of {len(ok)} trials loaded so): their rates and the "
            "pick follow that load; rerun on a quiet machine")


def verdict_caveats(results: list[Record], step: StepResult | None) -> list[str]:
    """What the loader-vs-step verdict cannot see, stated where it applies (audit M9, H4)."""
    out: list[str] = []
    ok = ok_loaders(results)
    if step is None:
        return out
    if any(not r.config.get("decode") for r in ok):
        out.append("note: undecoded trials get no verdict: a model eats decoded samples (sweep --model decodes "
                   "unless --no-decode is given)")
    fed = [r for r in results if isinstance(r, E2EResult) and r.status == "ok"]
    if str(step.device).startswith("cpu") and not fed:  # fed runs measured them together: nothing to caution
        out.append("note: loader and model step were measured apart on this CPU; training runs them together "
                   "on the same cores, so the fed rate is lower than either (check with dataperf e2e)")
    fast = [r for r in fed if r.samples_per_s > STEP_SLOW * step.samples_per_s and r.batch_size == step.batch_size]
    if fast:
        top = max(fast, key=lambda r: r.samples_per_s)
        out.append(f"warning: the model fed ran {top.samples_per_s:,.0f} samples/s, faster than its step alone "
                   f"({step.samples_per_s:,.0f}): the step alone was measured slow (load on the machine, or a "
                   "first-call cost), so every rate judged against it is low; the fed figures decide here")
    sizes = sorted({r.config.get("batch_size") for r in ok} - {step.batch_size})
    if sizes:
        out.append(f"note: the step was measured at batch {step.batch_size}; loader trials at batch {sizes} are "
                   "compared per sample with it, which assumes the step's per-sample cost does not change")
    return out


def table_findings(results: list[Record], step: StepResult | None) -> list[str]:
    """The lines under a loader table (sweep, report): the idle workers' warning, then the verdict's caveats."""
    return [line for line in [idle_warning(results), loaded_warning(results), *verdict_caveats(results, step)]
            if line]
