"""Effects: why a fed run and the separate measurements can disagree (idle workers, epoch restarts, a shared CPU
or GPU), each one sentence with its figures and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dataperf import backends
from dataperf.results import E2EResult, LimitsResult, LoaderResult, StepResult
from dataperf.verdict.rates import SPLIT_POINTS, STARVED, finite, machine_cores, restart_stall, workers_of

EffectName = Literal["epoch_restarts", "shared_cpu", "shared_gpu", "idle_workers"]


@dataclass
class Effect:
    """Something that makes a fed run differ from the loader and the step measured apart, or that the loader's
    rate owes to a cause the rate alone does not name: one sentence with its figures and the fix.

    stall_fraction: the model's idle share with this effect paid, where the separate measurements predict it."""

    name: EffectName
    sentence: str
    stall_fraction: float | None = None


CORES_FULL = 0.9  # a loader trial whose process tree keeps this share of the machine's cores busy has none left
CPU_BOUND = 0.8  # a sample whose thread CPU time is this share of its wall time keeps a core busy all along


def cpu_bound(lim: LimitsResult | None) -> bool:
    """Whether the limits probe found a sample keeping its core busy: read + decode + transform, thread CPU time
    at least CPU_BOUND of the wall time."""
    return lim is not None and finite(lim.decode_cpu_ms_per_sample) and finite(lim.decode_wall_ms_per_sample) \
        and lim.decode_cpu_ms_per_sample >= CPU_BOUND * lim.decode_wall_ms_per_sample


def cores_taken(trial: LoaderResult, lim: LimitsResult | None) -> bool:
    """Whether more workers than the trial's could only share its cores: it ran as many workers (DALI: threads) as
    the usable cores, and a sample keeps its core busy (the limits probe of its config). What cores_full reads from
    a trial's own CPU counters, which a short repeat's start-up dilutes: the H200's 16 workers on 16 cores (5.95 ms
    CPU of 6.09 ms a sample) left 20 untried and called the answer a lower bound, where 20 fed 3% less."""
    cores = (lim.usable_cores if lim is not None and lim.usable_cores else 0) or machine_cores(trial)
    return cpu_bound(lim) and workers_of(trial.config) >= cores


def cores_full(trial: LoaderResult) -> bool:
    """Whether the trial's process tree (main process and workers) kept CORES_FULL of the machine's cores busy:
    then more workers only share the same cores, and a larger count is settled without a trial. Unmeasured
    (--no-collect) is not full."""
    busy = trial.cpu_cores_busy_median
    return finite(busy) and busy >= CORES_FULL * machine_cores(trial)


def idle_workers(trial: LoaderResult) -> Effect | None:
    w, a = trial.config.get("num_workers", 0), trial.active_workers
    if not w or a is None or a >= w:
        return None
    shards = f"{trial.shards} shards for {w} workers" if trial.shards is not None else f"{w} workers"
    need = w * max(trial.world_size, 1)
    return Effect("idle_workers", f"idle workers: only {a} of {w} workers delivered samples ({shards}), so the rate "
                                  f"is {a} workers' rate; reshard to at least {need} shards (dataperf shards convert "
                                  f"SRC OUT --shards {need}) or use {a} workers")


def epoch_restarts(trial: LoaderResult, step_sps: float) -> Effect | None:
    """Non-persistent workers start again every epoch: a fed run pays that start-up, the steady rate does not.
    Named when the epoch rate (start-up included) predicts the model idle SPLIT_POINTS more than the steady rate."""
    c = trial.config
    if not c.get("num_workers") or c.get("persistent_workers") or not finite(trial.startup_s_median) \
            or not trial.epoch_samples:
        return None  # an epoch of unknown length: its start-up's share is not known (predicted_fed leaves it out)
    n = trial.epoch_samples
    steady = restart_stall(trial.samples_per_s_median, 0.0, n, 0, step_sps)
    epoch = restart_stall(trial.samples_per_s_median, trial.startup_s_median, n, 1, step_sps)
    if not epoch - steady >= SPLIT_POINTS:
        return None
    basis = "an epoch"
    return Effect("epoch_restarts",
                  f"epoch restarts: non-persistent workers start again every epoch ({trial.startup_s_median:.2f} s "
                  f"each, while the model waits), so over {basis} of {n} samples the model would idle "
                  f"{epoch * 100:.0f}% of the time, not the {steady * 100:.0f}% of the steady rate; use "
                  "--persistent-workers", epoch)


def shared_cpu(trial: LoaderResult, step: StepResult) -> Effect | None:
    """Loader and step measured apart each had the cores to themselves: at the rate they would run at together
    (the slower one's), the CPU time each spends per sample (its busy cores over its rate, measured alone)
    adds up to more cores than the machine has."""
    loader, model = trial.cpu_cores_busy_median, step.cpu_cores_busy_median
    if not trial.config.get("num_workers"):
        return None  # no workers: the training process loads between its steps, not beside them
    if not (finite(loader) and finite(model) and trial.samples_per_s_median > 0 and step.samples_per_s > 0):
        return None
    rate = min(trial.samples_per_s_median, step.samples_per_s)
    lc, sc = loader / trial.samples_per_s_median, model / step.samples_per_s
    cores = machine_cores(trial)
    if rate * (lc + sc) <= cores:
        return None
    return Effect("shared_cpu", f"shared CPU: at the {rate:,.0f} samples/s they would run at together, the loader "
                                f"needs {rate * lc:.1f} cores ({lc * 1000:.2f} ms of CPU a sample, measured alone) and "
                                f"the train step {rate * sc:.1f} ({sc * 1000:.2f} ms), more than the {cores} there "
                                "are: both run slower fed than measured apart (sweep --confirm or e2e measures it); "
                                "leave a core for the training process")


def shared_gpu(trial: LoaderResult, device: str) -> Effect | None:
    c = trial.config
    be = backends.of(c)
    if not be.decodes_on_gpu(c) or not device.startswith("cuda"):
        return None
    return Effect("shared_gpu", f"shared GPU: {be.title} decodes on the GPU the model trains on; measured apart "
                                "neither sees the other's GPU time (e2e's GPU idle measures the fed run)")


def loader_effects(trial: LoaderResult, step: StepResult | None) -> list[Effect]:
    """What the separate measurements of one config predict a fed run will see: idle workers always; with a
    model, epoch restarts, a shared CPU and a shared GPU."""
    found = [idle_workers(trial)]
    if step is not None and step.status == "ok":
        found += [epoch_restarts(trial, step.samples_per_s), shared_cpu(trial, step), shared_gpu(trial, step.device)]
    return [e for e in found if e is not None]


def fed_effects(run: E2EResult, trial: LoaderResult | None, step: StepResult | None) -> list[Effect]:
    """The effects that split a fed run from the prediction of its separate measurements (run's own loader_* and
    step_* figures: the loader trial and the step alone), as measured.

    idle workers: from the trial. Epoch restarts: the run restarted its workers and paying that start-up moves the
    prediction by SPLIT_POINTS or more. Shared CPU: with workers, the fed step's host time is over STARVED x the
    step alone (its slowest repeat, when the step is given): the workers starve the training process; or the
    measured stall exceeds the prediction beyond the noise while loader and step together need more cores than
    there are. Shared GPU: a backend's GPU decode (DALI's) on a CUDA model whose fed compute or stall exceeds what was
    measured apart."""
    out: list[Effect] = []
    if trial is not None and (e := idle_workers(trial)):
        out.append(e)
    if not (finite(run.step_samples_per_s) and finite(run.loader_samples_per_s)):
        return out
    cfg = run.config
    steady = restart_stall(run.loader_samples_per_s, 0.0, 1, 0, run.step_samples_per_s)
    paid = run.predicted_stall_fraction if finite(run.predicted_stall_fraction) else steady
    if run.epoch_restarts and cfg.get("num_workers") and not cfg.get("persistent_workers") \
            and paid - steady >= SPLIT_POINTS:
        out.append(Effect("epoch_restarts",
                          f"epoch restarts: the workers started again {run.epoch_restarts} times while measured "
                          f"({run.loader_startup_s:.2f} s each alone); paying that, the prediction is "
                          f"{paid * 100:.0f}% idle, at the steady rate alone {steady * 100:.0f}%; use "
                          "--persistent-workers", paid))
    alone_ms = 1000 * run.batch_size / run.step_samples_per_s
    slowest_alone = max(alone_ms, step.step_ms_max if step is not None and finite(step.step_ms_max) else 0)
    beyond = run.data_stall_fraction - paid > max(SPLIT_POINTS, _spread(run.data_stall_fraction_repeats))
    w = cfg.get("num_workers", 0)
    if w and finite(run.step_host_ms_median) and run.step_host_ms_median > STARVED * slowest_alone:
        out.append(Effect("shared_cpu",
                          f"shared CPU: fed, the train step took {run.step_host_ms_median:.1f} ms of host time "
                          f"against {alone_ms:.1f} ms alone: the loader's {w} workers starve the training process "
                          f"of CPU; leave cores for it (fewer workers, e.g. {max(w // 2, 1)})",
                          run.data_stall_fraction))
    elif beyond and trial is not None and step is not None and (e := shared_cpu(trial, step)):
        out.append(e)
    if trial is not None and (e := shared_gpu(trial, run.device)):
        slower = finite(run.compute_ms_median) and run.compute_ms_median > (1 + SPLIT_POINTS) * alone_ms
        if slower or beyond:
            out.append(e)
    return out


def _spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0
