"""The answer a set of records gives, printed one way: `sweep` prints it after its trials and `report` from a
results file, so the same records print the same answer through both; `tune` ends with the same decision lines
(print_decision). It shows what the records and the
verdict over them (a Recommendation: the pick, each trial against the model, the findings, the limits, the fed
runs) hold, and judges nothing itself: the caller hands it the Recommendation (sweep's own, which holds the
lower bound its plan decided; report's from verdict.recommend with the bound read back from the sweep's decision
record, verdict.saved_bound)."""

from __future__ import annotations

from collections.abc import Sequence

from dataperf import verdict
from dataperf.commands import _render, memory
from dataperf.commands import step as step_command
from dataperf.results import LimitsResult, LoaderConfig, Record


def print_answer(recs: list[Record], rec: verdict.Recommendation, verbose: bool = False,
                 pictures: Sequence[str] = ()) -> None:
    """The loader table (each row against the model as rec.fits judged it; `verbose`: every column), the failed
    trials, the trials' notes, what the table cannot show (rec.findings), the step judged against, memory
    records, the lines naming the pictures drawn of these records (`pictures`, given by the caller, who drew
    them), and the verdict in full (fed runs, limits, the line, the effects, the DataLoader arguments)."""
    console = _render.console
    loaders = [r for r in recs if r.kind == "loader"]
    if loaders:
        console.print(_render.loader_table(recs, rec, verbose=verbose))
    _render.print_failures(recs)
    _render.print_trial_notes(recs)
    _render.print_warnings(rec)
    if rec.step is not None:
        step_command.render(rec.step)
    mem = [r for r in recs if r.kind == "memory"]
    if mem:
        memory.render(mem)
    for line in pictures:
        console.print(line)
    if loaders:
        print_decision(rec)


def print_decision(rec: verdict.Recommendation | None, limits: LimitsResult | None = None,
                   config: LoaderConfig | None = None) -> None:
    """The decision, the end of every answer: with a verdict, the verdict in full (the fed runs, the limits of
    the judged config, the recommendation's line, the effects, the DataLoader arguments and what to expect);
    without one (`tune` with no model), the limits of the pick and the DataLoader arguments to set."""
    if rec is not None:
        _render.print_recommendation(rec)
        return
    if limits is not None:
        _render.print_limits(limits)
    if config is not None:
        _render.console.print(f"answer: {verdict.dataloader_args(config)}", soft_wrap=True)


def knob_words(r) -> str:
    """A ranks trial's prefetch, pin and persistence, as the answer names them."""
    on = lambda k: "on" if r.config.get(k) else "off"  # noqa: E731
    return f"prefetch {r.config.get('prefetch_factor')}, pin {on('pin_memory')}, persistent {on('persistent_workers')}"


def print_ranks(recs: list[Record]) -> None:
    """`sweep --ranks G`'s answer (verdict.ranks_answer over the ranks records): the table of worker counts a rank,
    the pick with each rank's fed rate and data wait, what binds, today's practice on the same host beside it, how
    many ranks the host's CPUs can feed, and the torchrun line and DataLoader each rank builds."""
    from rich.table import Table

    from dataperf.results import CONSUMER_GIVEN, CONSUMER_MODEL, RanksResult, fmt

    a = verdict.ranks_answer(recs)
    if a is None:
        return
    say, pct = _render.say, lambda x: f"{100 * x:.0f}%"
    how = {CONSUMER_GIVEN: "paced at the given --step-rate",
           CONSUMER_MODEL: "the real model on each rank's own GPU"}.get(a.consumer, "paced at the model's step rate, "
                                                                          "measured once on this machine")
    say(f"ranks: {a.ranks} on this host's {a.host_cores} cores, each fed by a consumer taking "
        f"{a.demand_samples_per_s_per_rank:,.0f} samples/s ({how})")
    t = Table(title=f"workers per rank, {a.ranks} ranks reading at once")
    for col in ("workers/rank", "fed/rank, slowest", "fed, total", "waves, slowest rank", "data wait, slowest rank",
                "main CPU, busiest", "host cores busy", "CPU ms/sample"):
        t.add_column(col, justify="right")
    for r in a.trials:
        slow = r.slowest_rank or 0
        waves = r.waves_per_rank[slow] if len(r.waves_per_rank) > slow else 0
        t.add_row(str(verdict.ranks.workers(r)), fmt(r.fed_samples_per_s_slowest, 0), fmt(r.fed_samples_per_s_total, 0),
                  str(waves) if waves else "none (all steps)", pct(r.data_wait_fraction_per_rank[slow]),
                  fmt(max(r.main_cpu_cores_busy_per_rank), 2), f"{fmt(r.host_cpu_cores_busy, 1)}/{r.host_cores}",
                  fmt(r.cpu_ms_per_sample, 2))
    _render.console.print(t)
    _render.print_failures([r for r in recs if isinstance(r, RanksResult)])
    if a.pick is None:
        say("no answer: every count failed (the errors are above)")
        return
    p = a.choice
    w = verdict.ranks.workers(p)
    for v in a.variants:
        say(f"at {w} worker{'s' if w != 1 else ''} a rank, {knob_words(v)}: fed {v.fed_samples_per_s_slowest:,.0f} "
            f"samples/s a rank (the ladder's {knob_words(a.pick)}: {a.pick.fed_samples_per_s_slowest:,.0f}; a setting "
            f"replaces it only over x{1 + verdict.ranks.SETTLED:.2f})", markup=False)
    c = LoaderConfig(**p.config)
    waits = ", ".join(f"rank {i} {pct(w)}" for i, w in enumerate(p.data_wait_fraction_per_rank))
    say(f"recommended: {w} worker{'s' if w != 1 else ''} per rank ({knob_words(p)}): fed "
        f"{p.fed_samples_per_s_slowest:,.0f} samples/s a rank (the slowest, rank {p.slowest_rank}), "
        f"{p.fed_samples_per_s_total:,.0f} in total; data wait {waits}")
    if a.fed:
        say(f"every rank is fed: its consumer gets {p.fed_samples_per_s_slowest / a.demand_samples_per_s_per_rank:.0%}"
            " of its step rate")
    elif not a.settled:
        say(f"NOT SETTLED: {verdict.ranks.workers(a.best)} workers a rank, the most tried, still gained: the rate "
            "is a lower bound (the data or the cores left no more to try)")
    else:
        say(f"INPUT-BOUND: the slowest rank is fed {p.fed_samples_per_s_slowest / a.demand_samples_per_s_per_rank:.0%}"
            " of its step rate, whatever the workers a rank")
    say(f"binding limit: {a.binding} ({verdict.ranks.LIMITS[a.binding]})")
    for pr in a.practices:
        if pr.trial is None:
            say(f"beside it: {pr.name}: {pr.workers} a rank, not measured (not among the counts tried, or the data "
                "gives too few batches for it)")
        else:
            say(f"beside it: {pr.name}: {pr.workers} a rank, fed {pr.trial.fed_samples_per_s_slowest:,.0f} samples/s "
                f"a rank ({pr.trial.fed_samples_per_s_total:,.0f} in total): the pick gets x{pr.gain:.2f}")
    if a.host_samples_per_s == a.host_samples_per_s:
        say(f"this host's CPUs: {a.host_cores} cores at {a.best.cpu_ms_per_sample:.2f} ms of CPU a sample (workers "
            f"and the ranks' main processes) give about {a.host_samples_per_s:,.0f} samples/s: enough for "
            f"{a.ranks_fed:.1f} ranks at {a.demand_samples_per_s_per_rank:,.0f} samples/s each")
    say(f"run: torchrun --nproc_per_node {a.ranks} your_train.py", shell=True, markup=False)
    args = verdict.dataloader_args(c).replace("DataLoader(dataset, ", "DataLoader(dataset, "
                                              "sampler=DistributedSampler(dataset), ", 1)
    _render.console.print(f"each rank: {args}", soft_wrap=True, markup=False, highlight=False)
