"""The known-answer scenarios of issue 49 (benchmarks/pick_quality.py --scenario S1a ... S6): each a user Dataset
and a paced model whose best fed rate, verdict and binding limit follow from their settings, written down here
beside them so that a decision can be scored right or wrong on each, not only against a measured grid.

Every piece reads its settings from the environment (KA_* here, PACED_* of tests/paced.py), so DataLoader
workers, dataperf subprocesses and benchmarks/plain_loop.py see the same ones; a scenario's `env` sets them. The
model is always paced:fixed_step_model (busy PACED_STEP_S a step whether it waited or not, as real compute is),
the user's batch size 8. Rates below are samples/s; "w" is num_workers, prefetch 2 unless said.

Binding-limit names are dataperf's (dataperf/verdict/limits.py LIMITS: storage, decode, main_process, workers,
h2d, model), plus UNMEASURED for a cap no measured ceiling explains (issue 49 Build 1: "a limit dataperf does not
measure"), which the decision record must name so (see UNMEASURED).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from dataclasses import dataclass, field

import torch
from paced import _env, _image, pace, sample_s
from torch.utils.data import Dataset

# the binding-limit name the decision must give for a cap none of dataperf's ceilings explains (S2's lock): not
# one of LIMITS yet; issue 49 leaves the word to verdict/, so this is the one place to change it
UNMEASURED = "unmeasured"
BATCH = 8


def _n() -> int:
    return int(_env("KA_N", 4000))


class BurnMap(Dataset):
    """Samples that burn KA_BURN_S of this thread's CPU time each (a busy loop, not a sleep): the cores, not the
    workers, cap the rate at cores / KA_BURN_S; CPU time does not stretch when another process shares the core."""

    def __len__(self) -> int:
        return _n()

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        t0, burn = time.thread_time(), _env("KA_BURN_S", 0.01)
        while time.thread_time() - t0 < burn:
            pass
        return _image(), i % 10


class WaveMap(Dataset):
    """Workers that deliver together, paced on absolute deadlines: each worker's k-th batch of BATCH samples is
    ready at KA_WAVE_T0 + (k + 1) x KA_WAVE_S (wall-clock time, the same for every worker), so W workers' batches
    come in waves of W every KA_WAVE_S, at W x BATCH / KA_WAVE_S samples/s, whatever else the machine runs (as
    CPU-bound workers sharing the cores do, without their dependence on the load)."""

    def __init__(self) -> None:
        self.taken = 0  # this worker's samples so far (each worker process has its own copy)

    def __len__(self) -> int:
        return _n()

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        self.taken += 1
        if self.taken % BATCH == 0:  # the batch's last sample: the batch is ready at its wave's deadline
            wave = self.taken // BATCH
            left = _env("KA_WAVE_T0", 0.0) + wave * _env("KA_WAVE_S", 1.0) - time.time()
            if left > 0:
                time.sleep(left)
        return _image(), i % 10


_locks: dict[int, int] = {}  # pid -> fd of the lock file: flock locks an open file, so each process opens its own


def _lock_fd() -> int:
    pid = os.getpid()
    if pid not in _locks:
        path = os.environ.get("KA_LOCK_FILE", "/tmp/dataperf-ka.lock")
        _locks[pid] = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    return _locks[pid]


class LockedMap(Dataset):
    """Each sample sleeps KA_FREE_S outside, then holds a machine-wide file lock (flock on KA_LOCK_FILE) for
    KA_LOCK_S: a shared resource (a rate-limited store, one disk head, a licence server). W workers give
    min(W / (free + lock), 1 / lock): past the cap, more workers only queue. A file lock, not a multiprocessing
    one, so that every process (dataperf's probes, the plain loop) shares it, as a real shared resource is."""

    def __len__(self) -> int:
        return _n()

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(_env("KA_FREE_S", 0.015))
        fd = _lock_fd()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            time.sleep(_env("KA_LOCK_S", 0.01))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return _image(), i % 10


def is_slow(i: int) -> bool:
    """KA_TAIL_FRACTION of the indices (5%), fixed by a hash of the index: the same samples every run, spread
    over the epoch (not every 20th, which would land on the same workers' batches)."""
    h = int.from_bytes(hashlib.blake2b(i.to_bytes(8, "little"), digest_size=4).digest(), "little")
    return h < _env("KA_TAIL_FRACTION", 0.05) * 2**32


class TailMap(Dataset):
    """Paced samples of PACED_T, KA_TAIL_X times that (10x) for the slow ones (is_slow): a heavy tail whose mean
    sets the rate, (1 - f) T + f X T a sample, and whose spread short fed runs misread."""

    def __len__(self) -> int:
        return _n()

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        pace(sample_s() * (_env("KA_TAIL_X", 10.0) if is_slow(i) else 1.0))
        return _image(), i % 10


def _received() -> SlowReceive:
    time.sleep(_env("KA_RECV_S", 0.03))
    return SlowReceive()


class SlowReceive:
    """Free to make and to send; unpickling it sleeps KA_RECV_S in the receiving process (the main process, once
    a batch, serial with the step). Built by a worker's collate only: at w=0 nothing is pickled, nothing paid."""

    def __reduce__(self):
        return (_received, ())


def _collate(samples: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor, SlowReceive]:
    return torch.stack([x for x, _ in samples]), torch.tensor([y for _, y in samples]), SlowReceive()


class ReceiveMap(Dataset):
    """Paced samples of PACED_T batched with a SlowReceive (its own collate_fn, as dataperf and a user's loop use
    it): the main process pays KA_RECV_S a batch to receive it whenever workers make the batches."""

    collate_fn = staticmethod(_collate)

    def __len__(self) -> int:
        return _n()

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        pace(sample_s())
        return _image(), i % 10


def burn_map() -> BurnMap:
    return BurnMap()


def locked_map() -> LockedMap:
    return LockedMap()


def tail_map() -> TailMap:
    return TailMap()


def receive_map() -> ReceiveMap:
    return ReceiveMap()


@dataclass(frozen=True)
class Known:
    """A scenario and its analytic answer at the user's batch size: the best fed rate (whole epochs), whether
    even the best config leaves the model waiting more than 5% mid-epoch (INPUT-BOUND) or some config feeds it,
    the binding limit's accepted names (dataperf's), and the cheapest config reaching 0.95 of the best (the
    cheapest that feeds, where one does)."""

    name: str
    what: str
    factory: str
    env: dict[str, str]
    best: float
    input_bound: bool
    binding: tuple[str, ...]
    cheapest: dict[str, object]
    why: str
    persistent: str = "off"  # the truth grid's persistent workers: "off", or "both" where the answer needs them
    run_s: float = 3.0  # the truth's fed window cap (seconds a run)
    epoch_start_s: float | None = None  # the analytic wait for an epoch's first batch at the cheapest config
    model: str = "paced:fixed_step_model"
    rates: dict[str, float] = field(default_factory=dict)  # analytic fed rate of some configs (by short label)

    @property
    def count(self) -> int:
        return int(self.env.get("KA_N", self.env.get("PACED_N", 4000)))

    def analytic(self, workers: int, persistent: bool) -> float | None:
        """The analytic fed rate of a grid config, where the definition gives it."""
        return self.rates.get(f"w{workers}{'p' if persistent and workers else ''}", self.rates.get(f"w{workers}"))


def _step(model_sps: float) -> str:
    return f"{BATCH / model_sps:g}"


def _serial(sample_s_: float, model_sps: float) -> float:
    """w=0: a batch's samples, then its step, in one process."""
    return BATCH / (BATCH * sample_s_ + BATCH / model_sps)


S1_BURN = 0.01  # CPU seconds a sample: 1 worker 100/s, 2 cores 200/s


def _s1(name: str, model_sps: float) -> Known:
    fast = model_sps > 2 / S1_BURN
    per_worker = 1 / S1_BURN
    rates = {"w0": _serial(S1_BURN, model_sps),
             **{f"w{w}": min(model_sps, w * per_worker, 2 / S1_BURN) for w in (1, 2, 3, 4, 6, 8)}}
    return Known(
        name, f"CPU-burning samples ({S1_BURN * 1e3:g} ms CPU each) with a {'fast' if fast else 'slow'} model "
        f"({model_sps:g}/s)", "ka_scenarios:burn_map",
        {"KA_BURN_S": f"{S1_BURN:g}", "PACED_STEP_S": _step(model_sps), "KA_N": "4000"},
        best=min(model_sps, 2 / S1_BURN), input_bound=fast, binding=("decode",) if fast else ("model",),
        cheapest={"num_workers": 2 if fast else 1},
        why=(f"2 cores / {S1_BURN * 1e3:g} ms CPU = 200/s < the model's {model_sps:g}: INPUT-BOUND at any worker "
             "count, the cores bind (decode: cores / CPU a sample), w=2 reaches it (the main process's own CPU "
             "takes a little: about 190 measured on a quiet box is the cap, not a shortfall)" if fast else
             f"one worker makes 100/s, twice the model's {model_sps:g}: w=1 feeds (w=0 is serial: "
             f"{rates['w0']:.1f}/s); the model binds"),
        rates=rates)


S2_FREE, S2_LOCK, S2_MODEL = 0.015, 0.01, 200.0
S3_T, S3_X, S3_F, S3_MODEL = 0.01, 10.0, 0.05, 200.0
S3_MEAN = (1 - S3_F) * S3_T + S3_F * S3_X * S3_T  # 14.5 ms a sample: 69/s a worker
S4_T, S4_MODEL = 0.00025, 80.0
S5_T, S5_RECV, S5_MODEL = 0.005, 0.03, 400.0
S6_T, S6_START, S6_MODEL, S6_N = 0.008, 0.5, 200.0, 48

SCENARIOS: dict[str, Known] = {k.name: k for k in (
    _s1("S1a", 400.0),
    _s1("S1b", 50.0),
    Known(
        "S2", f"a loader capped by a machine-wide lock ({S2_LOCK * 1e3:g} ms held a sample, {S2_FREE * 1e3:g} ms "
        "free)", "ka_scenarios:locked_map",
        {"KA_FREE_S": f"{S2_FREE:g}", "KA_LOCK_S": f"{S2_LOCK:g}", "PACED_STEP_S": _step(S2_MODEL),
         "KA_N": "4000"},
        best=1 / S2_LOCK, input_bound=True, binding=(UNMEASURED,), cheapest={"num_workers": 3},
        why=f"W workers give min(W / {(S2_FREE + S2_LOCK) * 1e3:g} ms, 1 / {S2_LOCK * 1e3:g} ms) = 40, 80, then "
            f"100/s from w=3 on, below the model's {S2_MODEL:g}: INPUT-BOUND, a lock no ceiling of dataperf's "
            "measures binds (decode: no CPU; workers: W x 40 is false past 3; storage: a user Dataset)",
        rates={"w0": BATCH / (BATCH * (S2_FREE + S2_LOCK) + BATCH / S2_MODEL),
               **{f"w{w}": min(w / (S2_FREE + S2_LOCK), 1 / S2_LOCK) for w in (1, 2, 3, 4, 6, 8)}}),
    Known(
        "S3", f"a heavy tail: {S3_F:.0%} of samples {S3_X:g}x slower ({S3_T * 1e3:g} ms paced, by index)",
        "ka_scenarios:tail_map",
        {"PACED_T": f"{S3_T:g}", "KA_TAIL_X": f"{S3_X:g}", "KA_TAIL_FRACTION": f"{S3_F:g}",
         "PACED_STEP_S": _step(S3_MODEL), "KA_N": "4000"},
        best=S3_MODEL, input_bound=False, binding=("model",), cheapest={"num_workers": 4}, run_s=5.0,
        why=f"a sample takes {S3_MEAN * 1e3:.1f} ms on average ({1 / S3_MEAN:.0f}/s a worker): w=3 makes "
            f"{3 / S3_MEAN:.0f}/s, 3% over the model's {S3_MODEL:g}, which a slow batch (170 against 80 ms) "
            f"delivered in order eats; w=4 ({4 / S3_MEAN:.0f}/s) feeds it; the model binds",
        rates={"w0": _serial(S3_MEAN, S3_MODEL), **{f"w{w}": min(S3_MODEL, w / S3_MEAN) for w in (1, 2, 3, 4, 6, 8)}}),
    Known(
        "S4", f"model-bound: {S4_T * 1e3:g} ms samples, a {S4_MODEL:g}/s model", "paced:sleep_map",
        {"PACED_T": f"{S4_T:g}", "PACED_STEP_S": _step(S4_MODEL), "PACED_N": "4000"},
        best=S4_MODEL, input_bound=False, binding=("model",), cheapest={"num_workers": 0},
        why=f"w=0 is serial: {BATCH * S4_T * 1e3:g} ms of samples + a {BATCH / S4_MODEL * 1e3:g} ms step = "
            f"{_serial(S4_T, S4_MODEL):.1f}/s (idle {S4_T * S4_MODEL:.0%}, 0.98 of the best): it feeds; any worker "
            f"feeds {S4_MODEL:g}; the model binds",
        rates={"w0": _serial(S4_T, S4_MODEL), **{f"w{w}": S4_MODEL for w in (1, 2, 3, 4, 6, 8)}}),
    Known(
        "S5", f"a main-process receive cost of {S5_RECV * 1e3:g} ms a batch, serial with the step",
        "ka_scenarios:receive_map",
        {"PACED_T": f"{S5_T:g}", "KA_RECV_S": f"{S5_RECV:g}", "PACED_STEP_S": _step(S5_MODEL), "KA_N": "4000"},
        best=BATCH / (S5_RECV + BATCH / S5_MODEL), input_bound=True, binding=("main_process",),
        cheapest={"num_workers": 1},
        why=f"with workers the main process receives ({S5_RECV * 1e3:g} ms) then steps ({BATCH / S5_MODEL * 1e3:g} "
            f"ms) each batch, serially: {BATCH / (S5_RECV + BATCH / S5_MODEL):.0f}/s whatever the workers (one makes "
            f"{1 / S5_T:.0f}/s), waiting {S5_RECV / (S5_RECV + BATCH / S5_MODEL):.0%}; w=0 pays no receive but "
            f"loads serially: {_serial(S5_T, S5_MODEL):.0f}/s; INPUT-BOUND, main_process binds",
        rates={"w0": _serial(S5_T, S5_MODEL),
               **{f"w{w}": min(BATCH / (S5_RECV + BATCH / S5_MODEL), w / S5_T) for w in (1, 2, 3, 4, 6, 8)}}),
    Known(
        "S6", f"short epochs: {S6_N // BATCH} batches an epoch, a worker start-up of {S6_START:g} s",
        "paced:sleep_map",
        {"PACED_T": f"{S6_T:g}", "PACED_START": f"{S6_START:g}", "PACED_STEP_S": _step(S6_MODEL),
         "PACED_N": str(S6_N)},
        best=S6_N / (BATCH * S6_T + S6_N / S6_MODEL), input_bound=False, binding=("model",),
        cheapest={"num_workers": 2, "persistent_workers": True}, persistent="both",
        epoch_start_s=BATCH * S6_T,
        why=f"an epoch of {S6_N} samples (dataperf's worker cap: 2): persistent workers pay one batch "
            f"({BATCH * S6_T * 1e3:g} ms) before the first step, then w=2 ({2 / S6_T:.0f}/s) "
            f"outruns the model ({S6_MODEL:g}): "
            f"{S6_N / (BATCH * S6_T + S6_N / S6_MODEL):.0f}/s a whole epoch, the steady wait 0 (feeds, the model "
            f"binds); without persistence every epoch pays {S6_START:g} s of start-up and worker forks "
            f"(~{S6_N / (S6_START + BATCH * S6_T + S6_N / S6_MODEL):.0f}/s); w=0 is serial "
            f"({_serial(S6_T, S6_MODEL):.0f}/s); the costly epoch start is the finding",
        rates={"w0": _serial(S6_T, S6_MODEL), "w1p": S6_N / (S6_N * S6_T + BATCH / S6_MODEL),
               "w2p": S6_N / (BATCH * S6_T + S6_N / S6_MODEL),
               "w1": S6_N / (S6_START + S6_N * S6_T + BATCH / S6_MODEL),
               "w2": S6_N / (S6_START + BATCH * S6_T + S6_N / S6_MODEL)}),
)}
