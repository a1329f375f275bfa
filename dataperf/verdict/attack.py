"""Which stage to attack: of a trial's stage breakdown (dataperf.measure.breakdown), the stage whose time reaches
the consumer as waiting, and the knob that shrinks it."""

from __future__ import annotations

from dataclasses import dataclass

from dataperf.backends import gpu_decode_hint
from dataperf.results import LoaderResult
from dataperf.stages import WORKER_STAGES

ATTACK = {
    "read": "pack small files into shards (large sequential reads), faster storage or enough page cache, or more "
            "workers to overlap reads",
    "decode": f"decode on the GPU ({gpu_decode_hint()[1]}), or store fewer pixels",
    "transform": "a lighter transform, or run it on the GPU on whole batches",
    "collate": "a cheaper collate: fewer Python objects a batch, tensors built once",
    "transfer": "hand over less: uint8 rather than float32 batches, fewer tensors a batch (the main process "
                "unpacks every batch)",
}
# the limit (dataperf.measure.limits) whose physical resource each stage spends: storage bandwidth, CPU cores,
# the workers, the main process's hand-over, the copy engine
STAGE_LIMITS = {"read": "storage", "decode": "decode", "transform": "decode", "collate": "workers",
                "transfer": "main_process", "h2d": "h2d"}
WAITING = 0.5  # a consumer blocked in next() for over this share of a sample's period is fed by the workers


@dataclass
class Exposed:
    """The stage on the critical path, its time per sample and its share of the time it competes in."""

    stage: str
    ms_per_sample: float
    share: float
    of_ms: float  # the time the share is of: a worker's time per sample, or the consumer's period

    def sentence(self) -> str:
        whose = "a sample's worker time" if self.stage in WORKER_STAGES else "the consumer's time a sample"
        return (f"{self.stage} is {self.share:.0%} of {whose} ({self.ms_per_sample:.2f} of {self.of_ms:.2f} ms): "
                f"{ATTACK[self.stage]}")


def exposed(trial: LoaderResult) -> Exposed | None:
    """The stage to attack. The consumer is blocked on the workers (its wait in next() beyond the hand-over) for
    most of a sample's period: the workers are the path, and their largest stage is the one whose time it waits
    out. Blocked little: the hand-over (transfer) keeps it busy. None without a breakdown or a rate."""
    ms = trial.stage_ms_per_sample
    rate = trial.samples_per_s_median
    if not ms or not rate or rate != rate or rate <= 0:
        return None
    period = 1000 / rate
    blocked = trial.main_wait_ms_per_sample - ms.get("transfer", 0.0)
    worker = {k: v for k, v in ms.items() if k in WORKER_STAGES}
    if "transfer" in ms and (blocked != blocked or blocked < WAITING * period or not worker):
        return Exposed("transfer", ms["transfer"], min(ms["transfer"] / period, 1.0), period)
    if not worker:
        return None
    stage = max(worker, key=lambda k: worker[k])
    total = sum(worker.values())
    return Exposed(stage, worker[stage], worker[stage] / total if total > 0 else 0.0, total)
