"""`dataperf compare`: base vs head result files, and the table of their changes."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from dataperf.commands import _render
from dataperf.commands._options import str_list
from dataperf.results import fmt


@click.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@click.option("--metrics", callback=str_list, default="step_ms,peak_mem_mib,samples_per_s", show_default=True,
              help="comma list: samples_per_s, repeat_samples_per_s, step_ms, peak_mem_mib, payload_mib_s, "
                   "storage_read_mib_s, data_stall_fraction")
@click.option("--threshold", default="5%", show_default=True, help="smallest change that counts")
def compare(base, head, metrics, threshold) -> None:
    """Base vs head result files: medians, % change, noise-aware verdict; exit 1 on a regression."""
    from dataperf.workflows import compare as cmp

    changes = cmp.compare(base, head, metrics, cmp.parse_threshold(threshold))
    print_env_differences(cmp.env_differences(base, head))
    render(changes, threshold)
    for side, path in (("base", base), ("head", head)):
        for kind, n in cmp.unpaired(path).items():
            _render.console.print(f"note: {n} {kind} record(s) in {side} skipped: compare pairs records by their "
                                  f"config, and {kind} records have none")
    if cmp.has_regression(changes):
        sys.exit(1)


def print_env_differences(diffs: list[tuple[str, object, object]]) -> None:
    """A warning per provenance field in which base and head differ: the comparison is not like for like."""
    for k, b, h in diffs:
        _render.console.print(f"[yellow]warning: base and head differ in {k}: {b!r} vs {h!r}; the comparison is "
                              "not like for like[/yellow]")


def render(changes: list, threshold: str) -> None:
    """One row per config and metric: medians, change, its 95% CI and the verdict; then the count."""
    console = _render.console
    t = Table(title=f"base vs head (threshold {threshold})")
    for col in ("kind", "config", "metric", "base", "head", "change", "95% CI", "verdict"):
        t.add_column(col, justify="left" if col in ("kind", "config", "metric", "verdict") else "right")
    colour = {"regression": "red", "improvement": "green", "within noise": "yellow", "unchanged": "white",
              "too few repeats": "yellow"}
    for c in changes:
        t.add_row(c.kind, c.config[:60], c.metric, fmt(c.base_median, 2), fmt(c.head_median, 2),
                  f"{c.change_pct:+.1f}%", f"{c.ci_pct[0]:+.1f}..{c.ci_pct[1]:+.1f}%",
                  f"[{colour[c.verdict]}]{c.verdict}[/{colour[c.verdict]}]")
    console.print(t)
    n = sum(c.verdict == "regression" for c in changes)
    console.print("verdict: regression when the whole 95% CI is beyond the threshold on the worse side")
    few = sum(c.verdict == "too few repeats" for c in changes)
    if few:
        console.print(f"note: {few} row(s) have fewer than 5 repeats a side: no verdict (measure with --repeats 5, "
                      "or pool several runs in one file)")
    console.print(f"{n} regression(s)" if n else "no regression")
