"""`sweep --ranks G` judged: the workers per rank to give each of G ranks on one host, what every rank is then fed,
what binds, what today's rules of thumb get on the same host, and how many ranks the host's CPUs can feed at all
(docs/distributed.md defines each figure).

Every rate here is a RanksResult's fed rate of its slowest rank (a synchronous data-parallel step runs at the
slowest rank's pace), over windows in which every rank read at once."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dataperf.results import RanksResult

# a count within 5% of the best is as good (the pick: the fewest such workers); a top rung gaining less settles
# the ladder. 5%, not less: the same count measured twice on the shared 2-core box differed by up to 4%
SETTLED = 0.05
FEEDS = 0.95  # a rank's consumer fed at 95% of its step rate or more waits on nothing that matters: the model binds
BUSY = 0.85  # a share of a core (a main process) or of the host's cores busy at which that CPU is the limit
RULE_OF_THUMB = (2, 4)  # "2-4 workers per GPU" (PyTorch's tutorials, pytorch/pytorch#23048): both ends measured

LIMITS = {  # the binding limit's name -> its words
    "model": "the model: every rank's consumer takes batches at its step rate",
    "cores": "the host's cores, shared by the ranks' workers and main processes",
    "main_process": "a rank's main process (one core: it receives, pins and hands over every batch)",
    "storage": "storage (or another shared wait): the cores are not busy, yet more workers do not gain",
}


def slowest(r: RanksResult) -> float:
    """The fed rate a synchronous step gets from this config: its slowest rank's, samples/s a rank."""
    return r.fed_samples_per_s_slowest


def tf_data_default(ranks: int, cores: int) -> int:
    """tf.data's default for G pipelines on one host (AUTOTUNE's parallelism is every core), split evenly: cores / G
    workers a rank, at least 1."""
    return max(cores // max(ranks, 1), 1)


KNOBS = ("prefetch_factor", "pin_memory", "persistent_workers")  # tried one at a time at the ladder's pick


def knobs(r: RanksResult) -> tuple:
    """A trial's prefetch, pin and persistence: the ladder's trials share one setting, a variant differs."""
    return tuple(r.config.get(k) for k in KNOBS)


def _finished(recs: list) -> list[RanksResult]:
    return [r for r in recs if isinstance(r, RanksResult) and r.status == "ok" and slowest(r) == slowest(r)]


def ok_trials(recs: list) -> list[RanksResult]:
    """The worker ladder's finished trials (the first ranks record's prefetch, pin and persistence), fewest workers
    first; the latest of each count where one was run twice."""
    every = [r for r in recs if isinstance(r, RanksResult)]
    by: dict[int, RanksResult] = {}
    for r in _finished(every):
        if knobs(r) == knobs(every[0]):
            by[workers(r)] = r
    return [by[w] for w in sorted(by)]


def variants(recs: list, pick: RanksResult | None) -> list[RanksResult]:
    """The finished trials at the pick's worker count with another prefetch, pin or persistence than the ladder's
    (--prefetch-factor 2,4, --pin-memory both ...: each other value alone, measured after the ladder)."""
    if pick is None:
        return []
    return [r for r in _finished(recs) if workers(r) == workers(pick) and knobs(r) != knobs(pick)]


def choice_of(pick: RanksResult, tried: list[RanksResult]) -> RanksResult:
    """The config to run: the ladder's pick, unless a variant at its count feeds the slowest rank more than SETTLED
    faster (within SETTLED the two are one rate, as two counts are, and the ladder's setting was the user's
    first)."""
    best = best_of(tried)
    return best if best is not None and slowest(best) > (1 + SETTLED) * slowest(pick) else pick


def workers(r: RanksResult) -> int:
    return int(r.config.get("num_workers", 0))


def best_of(trials: list[RanksResult]) -> RanksResult | None:
    return max(trials, key=slowest, default=None)


def pick_of(trials: list[RanksResult]) -> RanksResult | None:
    """The fewest workers a rank whose slowest rank is fed within SETTLED of the best measured (fewer workers: less
    memory and start-up, the same rate)."""
    best = best_of(trials)
    if best is None:
        return None
    return next(r for r in trials if slowest(r) >= (1 - SETTLED) * slowest(best))


def ranks_settled(trials: list[RanksResult]) -> bool:
    """Whether more workers a rank could still change the answer: not when the best is not the largest count tried,
    when its consumers are fed, or when it gained less than SETTLED over the count below it (trials: fewest
    workers first). A sweep that cannot go on (the data, the cores) leaves an unsettled answer a lower bound."""
    best = best_of(trials)
    if best is None or best is not trials[-1] or len(trials) < 2 or fed(best):
        return True
    return slowest(best) < (1 + SETTLED) * slowest(trials[-2])


def fed(r: RanksResult) -> bool:
    """Every rank's consumer is fed: the slowest rank gets FEEDS of its step rate or more."""
    return slowest(r) >= FEEDS * r.demand_samples_per_s_per_rank


def binding(r: RanksResult) -> str:
    """What limits this config's fed rate (a key of LIMITS): the model where every rank is fed; else a rank's main
    process busy BUSY of a core or more; else the host's cores, BUSY of them busy or more; else storage."""
    if fed(r):
        return "model"
    if max(r.main_cpu_cores_busy_per_rank or [0.0]) >= BUSY:
        return "main_process"
    if r.host_cpu_cores_busy >= BUSY * r.host_cores:
        return "cores"
    return "storage"


@dataclass
class Practice:
    """What users set today, measured on the same host beside the pick: its name, its workers a rank, its trial
    (None: not measured, e.g. more workers than the data gives batches), and the pick's gain over it."""

    name: str
    workers: int
    trial: RanksResult | None
    gain: float | None  # the pick's slowest-rank rate / this one's


@dataclass
class RanksAnswer:
    """The answer to `sweep --ranks G` (docs/distributed.md): the pick, its rates, what binds, today's practice
    beside it, and how many ranks the host's CPUs can feed."""

    ranks: int
    host_cores: int
    demand_samples_per_s_per_rank: float
    consumer: str
    trials: list[RanksResult] = field(default_factory=list)
    pick: RanksResult | None = None  # the ladder's: the fewest workers a rank within SETTLED of its best
    variants: list[RanksResult] = field(default_factory=list)  # other prefetch / pin / persistence at its count
    choice: RanksResult | None = None  # what to run: the pick, or a variant clearly faster (choice_of)
    best: RanksResult | None = None
    fed: bool = False
    binding: str = ""
    settled: bool = True  # False: the best is the largest count tried and still gained (a lower bound)
    practices: list[Practice] = field(default_factory=list)
    # the host's CPUs: samples/s they can decode at the best config's CPU per sample (main processes included),
    # and that over one rank's demand: the ranks this host can feed at all
    host_samples_per_s: float = float("nan")
    ranks_fed: float = float("nan")


def answer(recs: list) -> RanksAnswer | None:
    """The answer from a file's ranks records (of one G); None without any."""
    trials = ok_trials(recs)
    every = [r for r in recs if isinstance(r, RanksResult)]
    if not every:
        return None
    first = trials[0] if trials else every[0]
    a = RanksAnswer(first.ranks, first.host_cores, first.demand_samples_per_s_per_rank, first.consumer, trials)
    if not trials:
        return a
    a.best, a.pick = best_of(trials), pick_of(trials)
    a.variants = variants(recs, a.pick)
    a.choice = choice_of(a.pick, a.variants)
    a.fed = fed(a.choice)
    a.binding = binding(a.choice if a.fed else max(a.best, a.choice, key=slowest))
    a.settled = ranks_settled(trials)
    by = {workers(r): r for r in trials}
    for name, w in [(f"rule of thumb ({RULE_OF_THUMB[0]} workers per GPU)", RULE_OF_THUMB[0]),
                    (f"rule of thumb ({RULE_OF_THUMB[1]} workers per GPU)", RULE_OF_THUMB[1]),
                    (f"tf.data default (all {a.host_cores} cores / {a.ranks} ranks)",
                     tf_data_default(a.ranks, a.host_cores))]:
        t = by.get(w)
        a.practices.append(Practice(name, w, t, slowest(a.choice) / slowest(t) if t and slowest(t) > 0 else None))
    cpu_ms = a.best.cpu_ms_per_sample
    if cpu_ms > 0 and math.isfinite(cpu_ms):
        a.host_samples_per_s = a.host_cores / (cpu_ms / 1000)
        if a.demand_samples_per_s_per_rank > 0:
            a.ranks_fed = a.host_samples_per_s / a.demand_samples_per_s_per_rank
    return a
