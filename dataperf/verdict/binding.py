"""The binding limit, judged with the verdict and never against it: the model when the loader feeds it; when it
does not, the lowest of the loader's ceilings as the fed pipeline meets them, if the judged rate comes near it;
else a limit dataperf does not measure, with the evidence. The advice (`attack`) acts on that limit only."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dataperf import backends
from dataperf.results import LimitsResult, LoaderConfig, LoaderResult, StepResult
from dataperf.stages import WORKER_STAGES
from dataperf.verdict.attack import ATTACK, STAGE_LIMITS
from dataperf.verdict.rates import (
    GIL_BOUND,
    cpu_cap,
    finite,
    host_s,
    machine_cores,
    model_rate,
    receive_s,
    workers_of,
)

UNMEASURED = "unmeasured"
EXPLAINS = 0.85  # a ceiling explains a rate that reaches this share of it; below, something else binds first
NO_GAIN = 1.05  # more workers that gave no more than this multiple of the rate: the workers do not bind
CONTENTION = 1.5  # a sample's worker time this many times its time at the fewest workers: they wait on a share
FLAT_CPU = 1.2  # ... while its CPU time grew by less than this factor
BUSY_CORES = 0.8  # ... and the cores were not this full (workers past the cores share them: that is decode)
OTHERS_FLOOR = 0.25  # the fewest cores a trial is taken to have had beside other processes' load


@dataclass(frozen=True)
class Binding:
    """The limit that binds (a name of limits.LIMITS, UNMEASURED, or "" when nothing could be judged), its
    ceiling as fed (samples/s; NaN for UNMEASURED), the rate judged against it (the fed rate mid-epoch where the
    fed loop measured it, else the prediction), the sentence, and the one line of advice that acts on it."""

    limit: str
    samples_per_s: float
    rate_samples_per_s: float
    sentence: str
    advice: str = ""


@dataclass(frozen=True)
class Contention:
    """A sample's worker time rising with the workers at flat CPU (the 2026-12-06 audit's S2: 26 ms at 1 worker,
    63-85 ms at 6-8, a lock): what no ceiling dataperf measures explains."""

    low_workers: int
    low_ms: float
    high_workers: int
    high_ms: float
    low_cpu_ms: float
    high_cpu_ms: float

    def sentence(self) -> str:
        one = "worker" if self.low_workers == 1 else "workers"
        return (f"a sample's worker time rose from {self.low_ms:.1f} ms at {self.low_workers} {one} to "
                f"{self.high_ms:.1f} ms at {self.high_workers} while its CPU time went {self.low_cpu_ms:.1f} -> "
                f"{self.high_cpu_ms:.1f} ms: the workers wait on something they share")


def _full(r: LoaderResult, cores: int | None = None) -> bool:
    """The trial's workers were held by full cores: its own busy cores reach BUSY_CORES of the cores it could use,
    or, with samples that keep a worker's core busy, its own and those other processes took do (workers that
    sleep or wait on I/O are not slowed by busy cores: the 2026-12-06 audit's paced workers beside a loaded box
    still bound as workers)."""
    busy, others = r.cpu_cores_busy_median, r.other_cores_busy_median
    own = busy if finite(busy) else 0.0
    c = cores or machine_cores(r)
    if own >= BUSY_CORES * c:
        return True
    cpu, worker = _cpu_ms(r), _worker_ms(r)
    cpu_bound = finite(cpu) and worker > 0 and cpu >= GIL_BOUND * worker
    return cpu_bound and finite(others) and own + others >= BUSY_CORES * c


def _worker_ms(r: LoaderResult) -> float:
    ms = r.stage_ms_per_sample or {}
    return sum(v for k, v in ms.items() if k in WORKER_STAGES and finite(v))


def _cpu_ms(r: LoaderResult) -> float:
    busy, rate = r.cpu_cores_busy_median, r.samples_per_s_median
    return 1000 * busy / rate if finite(busy) and finite(rate) and rate > 0 else math.nan


def _alike(a: LoaderConfig, b: LoaderConfig) -> bool:
    """The same config but for its workers, prefetch and persistence."""
    return (a.backend, a.batch_size, a.decode, a.transform, a.cache, a.pin_memory) == \
        (b.backend, b.batch_size, b.decode, b.transform, b.cache, b.pin_memory)


def contention(trials: list[LoaderResult], of: LoaderResult) -> Contention | None:
    """The evidence of a shared limit among `of`'s alike trials: its worker time a sample against the fewest
    workers' (at least 1), their CPU time a sample beside it. None without a breakdown or the rise."""
    mine = [r for r in trials if r.status == "ok" and r.config.get("num_workers") and
            _alike(r.loader_config, of.loader_config) and _worker_ms(r) > 0]
    if len(mine) < 2:
        return None
    low = min(mine, key=lambda r: r.config["num_workers"])
    high = max(mine, key=lambda r: (r.config["num_workers"], _worker_ms(r)))
    if high.config["num_workers"] <= low.config["num_workers"] or _worker_ms(high) < CONTENTION * _worker_ms(low):
        return None
    lc, hc = _cpu_ms(low), _cpu_ms(high)
    if finite(lc) and finite(hc) and hc >= FLAT_CPU * lc:
        return None  # a sample's CPU grew with its time: heavier work, not waiting
    if _full(high):
        return None  # the cores are full: workers past them share the cores, which decode names
    return Contention(low.config["num_workers"], _worker_ms(low), high.config["num_workers"], _worker_ms(high),
                      lc, hc)


def more_gave_no_more(trials: list[LoaderResult], of: LoaderResult) -> str | None:
    """Where an alike trial with more workers gave no more than NO_GAIN x `of`'s rate, with the cores not full:
    the measured evidence that the workers are not what binds (the 2026-12-06 audit's lock: 3 workers 95
    samples/s, 4 workers 94, while 3 x one worker's rate read 117). None where no such trial was run."""
    w = of.config.get("num_workers") or 0
    more = [r for r in trials if r.status == "ok" and (r.config.get("num_workers") or 0) > w and
            _alike(r.loader_config, of.loader_config)]
    if not w or not more or not finite(of.samples_per_s_median):
        return None
    top = max(more, key=lambda r: r.samples_per_s_median)
    if top.samples_per_s_median > NO_GAIN * of.samples_per_s_median or _full(top):
        return None
    return (f"{top.config['num_workers']} workers gave {top.samples_per_s_median:,.0f} samples/s, no more than "
            f"{w}'s {of.samples_per_s_median:,.0f}, with cores to spare")


def fed_ceilings(trial: LoaderResult, step: StepResult | None, limits: LimitsResult | None,
                 trials: list[LoaderResult]) -> dict[str, tuple[float, str]]:
    """Each loader-side ceiling of the trial's config (samples/s, how), as the fed pipeline meets it: storage and
    h2d as measured; decode (the cores) with the step's own CPU taken from the same cores; workers as one
    worker's rate (the limits' probe, else the fewest workers' trial) times the workers; the main process's
    hand-over serial with the step's host time. From the limits record where it has them, else the trials."""
    out: dict[str, tuple[float, str]] = {}
    cores = (limits.usable_cores if limits is not None and limits.usable_cores else None) or machine_cores(trial)
    if limits is not None:
        for k in ("storage", "h2d"):
            v = getattr(limits, f"{k}_samples_per_s")
            if finite(v) and v > 0:
                out[k] = (v, getattr(limits, f"{k}_how"))
    decode = limits.decode_samples_per_s if limits is not None else math.nan
    how = limits.decode_how if limits is not None else ""
    if not (finite(decode) and decode > 0) and finite(cpu := _cpu_ms(trial)) and cpu > 0:
        decode, how = 1000 * cores / cpu, f"{cores} cores / {cpu:.2f} ms CPU a sample (the trial's)"
    if finite(decode) and decode > 0:
        if step is not None and finite(step.cpu_cores_busy_median) and step.samples_per_s > 0:
            model_cpu = step.cpu_cores_busy_median / step.samples_per_s
            decode = 1 / (1 / decode + model_cpu / cores)
            how += f"; less the step's {1000 * model_cpu:.2f} ms CPU a sample on the same cores"
            both = cpu_cap(trial, step)  # the trial's whole CPU a sample (its consumer's too) beside the step's
            if both < decode:
                tree_ms = 1000 * trial.cpu_cores_busy_median / trial.samples_per_s_median
                decode, how = both, (f"{cores} cores / the CPU a sample of the trial ({tree_ms:.2f} ms, its "
                                     f"consumer's included) and the step ({1000 * model_cpu:.2f} ms)")
        others = trial.other_cores_busy_median
        if finite(others) and others >= 0.05:  # the cores other processes took during the trial were not the loader's
            left = max(cores - others, OTHERS_FLOOR)
            decode *= left / cores
            how += f"; on the {left:.1f} of {cores} cores other processes left it"
        out["decode"] = (decode, how)
    w = workers_of(trial.config)
    # workers past full cores share them: decode binds (the cores other processes took count as full)
    if w and not _full(trial, cores) and trial.config.get("backend") not in backends.ONE_STREAM:
        one = limits.per_worker_samples_per_s if limits is not None else math.nan
        how = "one worker's rate (the limits' probe)"
        if not (finite(one) and one > 0):
            alike = [r for r in trials if r.status == "ok" and r.config.get("num_workers") and
                     _alike(r.loader_config, trial.loader_config) and _worker_ms(r) > 0]
            low = min(alike, key=lambda r: r.config["num_workers"], default=None)
            one = 1000 / _worker_ms(low) if low is not None else math.nan
            how = f"one worker's rate at {low.config['num_workers']} worker(s) (its stage times)" if low else ""
        active = trial.active_workers or w
        if finite(one) and one > 0:
            out["workers"] = (active * one, f"{active} workers x {one:,.0f} samples/s, {how}")
    # the hand-over: the limits' replay where measured (workers that only copy: the training process's own
    # receive, no worker's send in it), else the trial's (rates.receive_s)
    main = limits.main_process_samples_per_s if limits is not None else math.nan
    recv = 1 / main if w and finite(main) and main > 0 else receive_s(trial)
    if recv > 0:
        host = host_s(step, model_rate(step, trial.config, trial.input_mib_per_sample)) if step is not None else 0.0
        out["main_process"] = (1 / (host + recv), f"the hand-over {1000 * recv:.2f} ms a sample" +
                               (f" after the step's {1000 * host:.2f} ms host time, one after the other"
                                if host else ""))
    return out


def judge(trial: LoaderResult | None, step: StepResult | None, input_bound: bool | None, rate: float,
          limits: LimitsResult | None, trials: list[LoaderResult], cuda: bool) -> Binding:
    """The binding limit of the judged config at the judged rate (samples/s): the model when it is fed; with no
    workers, the training process loading serially; else the lowest fed ceiling if the rate reaches EXPLAINS of
    it, else UNMEASURED (with the evidence of contention where the trials show it)."""
    if trial is None:
        return Binding("", math.nan, rate, "")
    name = trial.loader_config.short()
    if step is not None and input_bound is False:
        m = model_rate(step, trial.config, trial.input_mib_per_sample)
        alone = f"{step.samples_per_s:,.0f} samples/s alone" + (
            f", {m:,.0f} with {name}'s copies to the device" if abs(m - step.samples_per_s) >= 0.5 else "")
        return Binding("model", m, rate, f"binding limit: the model ({step.model}, {alone}); the loader feeds it "
                                         f"{rate:,.0f} samples/s mid-epoch")
    if step is not None and not workers_of(trial.config) and trial.config.get("backend") not in backends.ONE_STREAM:
        return Binding("workers", rate, rate, f"binding limit: workers: with none, {name} loads in the training "
                                              f"process, one sample after another with the step ({rate:,.0f} "
                                              "samples/s)",
                       "use workers (num_workers >= 1): loading then overlaps the step")
    cs = fed_ceilings(trial, step, limits, trials)
    if not cs or not finite(rate):
        return Binding("", math.nan, rate, "binding limit: not judged (no ceiling could be measured)")
    more = more_gave_no_more(trials, trial)
    if more is not None:
        cs.pop("workers", None)  # measured: more workers did not raise the rate, whatever W x one worker says
    if not cs:
        cs = {"workers": (math.inf, "")}
    limit, (ceiling, how) = min(cs.items(), key=lambda kv: kv[1][0])
    share = rate / ceiling
    if share >= EXPLAINS:
        return Binding(limit, ceiling, rate, f"binding limit: {limit} at {ceiling:,.0f} samples/s ({how}); "
                                             f"{name} reaches {share:.0%} of it", advice(limit, trial, cuda))
    c = contention(trials, trial)
    evidence = "".join(f"; {x}" for x in (more, c.sentence() if c else None) if x)
    return Binding(UNMEASURED, math.nan, rate,
                   f"binding limit: a limit dataperf does not measure (storage behind your Dataset, a lock, the "
                   f"network): {name} gives {rate:,.0f} samples/s, {share:.0%} of the lowest ceiling measured "
                   f"({limit} {ceiling:,.0f}){evidence}",
                   "find what the workers share (a lock, a rate-limited store, the network): more workers do not "
                   "pass it")


def advice(limit: str, trial: LoaderResult, cuda: bool) -> str:
    """What acts on this limit, in the terms of the trial's largest stage that spends it (no GPU named where the
    machine has none)."""
    if limit == "workers":
        return "more workers: the cores are not all busy" if trial.config.get("num_workers") else \
            "use workers (num_workers >= 1)"
    if limit == "h2d":
        return "pin_memory=True, and hand the GPU uint8 batches (normalize on the GPU)"
    ms = {k: v for k, v in (trial.stage_ms_per_sample or {}).items() if STAGE_LIMITS.get(k) == limit}
    stage = max(ms, key=lambda k: ms[k]) if ms else {"storage": "read", "decode": "decode",
                                                        "main_process": "transfer"}.get(limit)
    if stage is None:
        return ""
    what = f"{stage} {ms[stage]:.2f} ms a sample: " if stage in ms else ""
    if stage == "decode" and not cuda:
        return what + "a cheaper decode: store fewer pixels or a faster codec, or more cores"
    if stage == "transform" and not cuda:
        return what + "a lighter transform (fewer ops a sample, tensors built once), or more cores"
    return what + ATTACK[stage]
