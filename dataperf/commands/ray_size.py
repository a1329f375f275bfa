"""`dataperf ray-size`: how many CPU nodes of a given size, at what map concurrency, feed a demand through Ray Data:
one simulated node measured, the nodes predicted, N-1, N, N+1 measured and fed by a paced consumer."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from dataperf.commands import _render
from dataperf.commands._build import make_config, make_step_options, make_trial_options, resolve_data
from dataperf.commands._options import loader_options, split, trial_options
from dataperf.errors import UserError
from dataperf.results import fmt


@click.command("ray-size")
@click.argument("data", required=False)
@click.option("--step-rate", type=float, default=None, metavar="SAMPLES/S",
              help="the samples/s one rank's training step takes (else measured: --model)")
@click.option("--model", default=None, help="measure this model's step rate instead of --step-rate (cnn-small, "
                                            "gpt-small, MODULE:FACTORY)")
@click.option("--ranks", type=click.IntRange(min=1), default=1, show_default=True,
              help="data-parallel ranks the cluster feeds (the demand is the step rate x ranks)")
@click.option("--max-nodes", type=click.IntRange(min=1), default=16, show_default=True,
              help="the most simulated nodes measured")
@click.option("--feed-seconds", type=float, default=8.0, show_default=True,
              help="how long the paced consumer takes batches on each cluster size")
@loader_options("bench")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append each trial's record to this .jsonl")
@trial_options
def ray_size(data, step_rate, model, ranks, max_nodes, feed_seconds, out, **kw) -> None:
    """Size a Ray Data cluster: the nodes of --ray-node-cpus CPUs (simulated on this machine) and the map concurrency
    that feed --step-rate x --ranks samples/s, predicted from one node and measured at N-1, N and N+1."""
    from dataperf.measure import preflight
    from dataperf.results import jsonl
    from dataperf.verdict.ray import FED_SHARE
    from dataperf.workflows.ray_size import SizeRequest, run, sized

    loader, topts = split(kw, "bench")
    if (step_rate is None) == (model is None):
        raise UserError("give --step-rate SAMPLES/S (one rank's step rate) or --model to measure it, one of the two")
    if step_rate is not None and not step_rate > 0:
        raise UserError(f"--step-rate must be a positive number of samples/s, got {step_rate}")
    from dataperf.backends import CLUSTERED

    if loader["backend"] not in ("auto", *CLUSTERED):
        raise UserError(f"ray-size measures the ray backend, not {loader['backend']}; leave --backend out")
    if loader["ray_address"] or loader["ray_nodes"]:
        raise UserError("ray-size simulates the nodes it measures: give --ray-node-cpus C (each node's CPUs), not "
                        "--ray-address or --ray-nodes")
    node_cpus = loader.pop("ray_node_cpus")
    if not node_cpus or node_cpus < 1:
        raise UserError("give --ray-node-cpus C: the CPUs of each node to size (e.g. the CPU nodes you would add)")
    preflight.writable_file(out, "--out")
    data = resolve_data(data, loader["dataset_factory"])[0]
    loader.update(backend=CLUSTERED[0], decode=True if loader["decode"] is None else loader["decode"],
                  ray_nodes=1, ray_node_cpus=node_cpus)
    cfg = make_config(data, **loader)
    opts = make_trial_options(raw_dir=out.parent / "raw" if out else None, **topts)
    preflight.check_loader(data, cfg)
    if model:
        from dataperf.measure.step import measure_step

        step = measure_step(make_step_options(model, batch_size=cfg.batch_size, image_size=cfg.image_size))
        step_rate = step.samples_per_s
        _render.say(f"step: {model} takes {fmt(step_rate)} samples/s at batch {cfg.batch_size} on the CPU")
    demand = step_rate * ranks
    _render.print_data([data], cfg.decode)
    _render.say(f"demand: {fmt(step_rate)} samples/s a rank x {ranks} rank(s) = {fmt(demand)} samples/s; nodes of "
                f"{node_cpus} CPUs simulated on this machine")

    def said(p) -> None:
        if p.status != "ok":
            _render.say(f"{p.nodes} node(s), concurrency {p.concurrency}: failed: {p.error}")
            return
        _render.say(f"{p.nodes} node(s), concurrency {p.concurrency}: loader {fmt(p.samples_per_s)} samples/s; a "
                    f"consumer paced at {fmt(demand)} took {fmt(p.fed_samples_per_s)} "
                    f"({'feeds' if p.feeds(demand) else 'does not feed'})")

    with jsonl.exclusive(out) if out else contextlib.nullcontext():
        sizing, _ = run(SizeRequest(data, cfg, opts, demand, node_cpus, max_nodes, feed_seconds, out), said)
    if not sizing.predicted_nodes:
        raise UserError(f"one node could not be measured: {sizing.points[0].error}")
    n = sizing.predicted_nodes
    smallest = sizing.smallest_feeding()
    at = sizing.at(n)
    _render.say(f"predicted: {n} node(s) = ceil({fmt(demand)} / {fmt(sizing.per_node)} samples/s a node), "
                f"{fmt(sizing.predicted_rate(n))} samples/s"
                + (f"; measured at {n}: {fmt(at.samples_per_s)} samples/s (prediction off by "
                   f"{sizing.rate_error():.0%})" if at is not None and sizing.rate_error() is not None else ""))
    if smallest is None:
        _render.say(f"measured: none of {', '.join(str(p.nodes) for p in sizing.points)} node(s) fed the consumer "
                    f"(it took under {FED_SHARE:.0%} of the demand); more nodes than --max-nodes {max_nodes}, or a "
                    "faster pipeline (stage breakdown: dataperf bench --backend ray)")
        return
    _render.say(f"measured: the smallest that feeds is {smallest} node(s) (predicted {n}: off by "
                f"{sizing.node_error():+d})")
    from dataperf.backends.ray import args

    _render.say(f"answer: {args(sized(cfg, smallest, node_cpus))}")
