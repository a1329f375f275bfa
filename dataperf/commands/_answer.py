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
