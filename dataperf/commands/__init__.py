"""The command line: one module a command, its click options and the rendering of its records (asv's
`commands/` shape). COMMANDS lists them in `dataperf --help` order; cli.py adds each to the group."""

from dataperf.commands import (
    bench,
    compare,
    diagnose,
    e2e,
    lengths,
    memory,
    profile,
    ray_size,
    report,
    shards,
    step,
    sweep,
    tune,
    watch,
)

COMMANDS = [bench.bench, compare.compare, diagnose.diagnose, e2e.e2e, lengths.lengths, memory.memory, profile.profile,
            ray_size.ray_size, report.report, shards.shards, step.step, sweep.sweep, tune.tune, watch.watch]
