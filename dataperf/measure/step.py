"""Model step throughput: a real forward/backward/optimizer step on synthetic in-memory batches.

With no data loading in the loop, this is the rate at which the model can consume samples: the other half of
the input-bound verdict.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch
from torch import nn
from torch.profiler import record_function

from dataperf.errors import UserError
from dataperf.measure.models import BUILTIN, input_kind, load_model, loss_of
from dataperf.measure.zero import CHOICES as ZERO_CHOICES
from dataperf.results import HIGH_SPREAD_PCT, MIB, StepResult, summarize

OPTIMIZERS = ("adamw", "adam8bit", "adamw-cpu-offload", "zero", *ZERO_CHOICES)


@dataclass
class StepOptions:
    model: str = "gpt-small"
    batch_size: int = 8
    seq_len: int = 512
    image_size: int = 224
    device: str = "cpu"
    optimizer: str = "adamw"
    repeats: int = 3
    steps: int = 10
    warmup: int = 3
    input: str | None = None  # tokens | image; default: the model's own input_kind
    vocab: int = 32000
    amp: str | None = None  # bf16 autocast
    results_dir: Path | None = None  # where a CUDA OOM memory summary is written
    seed: int = 0
    deterministic: bool = False
    nan_guard_dir: Path | None = None  # check every step for NaN/inf, checkpoint there on the first
    nvml_interval_s: float = 0.02  # NVML sampling period (dataperf memory uses 1 s, as nvidia-smi -l 1)
    # one image sample as the loader delivers it, where only a real sample tells (a user's Dataset or transform:
    # measure.fed.loader_image): the synthetic batch takes this shape (C, H, W) and dtype instead of 3 x
    # image_size^2 uint8, which a model then converts as it would not (fed 8-px floats, a paced 100 ms step
    # alone read 104-111 ms on 224-px bytes, 100.1 on its own shape)
    image_shape: tuple[int, ...] | None = None
    image_dtype: str = "uint8"


def resolve_device(name: str) -> torch.device:
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {name} asked for, but torch sees no CUDA device; use --device cpu")
    try:
        return torch.device(name)
    except RuntimeError as e:
        raise UserError(f"bad --device {name!r}: {e}") from None


class CpuOffloadAdamW(torch.optim.Optimizer):
    """AdamW whose fp32 master weights and moments live in host memory: GPU memory keeps only the weights
    and gradients, at the cost of two host<->device copies per step."""

    def __init__(self, params, lr: float = 1e-4):
        params = [p for p in params if p.requires_grad]
        super().__init__(params, {"lr": lr})
        self.host = [p.detach().to("cpu", copy=True).pin_memory() if p.is_cuda else p.detach().clone()
                     for p in params]
        for h in self.host:
            h.grad = torch.zeros_like(h)
        self.inner = torch.optim.AdamW(self.host, lr=lr)

    @torch.no_grad()
    def step(self, closure=None):
        params = self.param_groups[0]["params"]
        for p, h in zip(params, self.host, strict=True):
            if p.grad is not None:
                h.grad.copy_(p.grad, non_blocking=True)
        if params and params[0].is_cuda:
            torch.cuda.synchronize()
        self.inner.step()
        for p, h in zip(params, self.host, strict=True):
            p.copy_(h, non_blocking=True)


def make_optimizer(name: str, model: nn.Module, lr: float = 1e-4) -> torch.optim.Optimizer:
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr)
    if name == "adam8bit":
        try:
            import bitsandbytes as bnb
        except Exception as e:
            raise UserError(f"--optimizer adam8bit needs bitsandbytes ({type(e).__name__}: {e}); "
                            "pip install bitsandbytes") from None
        try:
            return bnb.optim.Adam8bit(model.parameters(), lr=lr)
        except Exception as e:
            raise UserError(f"bitsandbytes Adam8bit could not be built here: {e}") from None
    if name == "adamw-cpu-offload":
        return CpuOffloadAdamW(model.parameters(), lr=lr)
    if name == "zero":
        import torch.distributed as dist
        from torch.distributed.optim import ZeroRedundancyOptimizer

        if not dist.is_initialized():
            raise UserError("--optimizer zero shards optimizer state across ranks: run under torchrun "
                            "(with one process it saves nothing)")
        return ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=lr)
    raise UserError(f"unknown --optimizer {name!r}; choose {', '.join(OPTIMIZERS)}")


def image_input(opts: StepOptions) -> tuple[tuple[int, ...], torch.dtype]:
    """One synthetic image sample's shape and dtype: the loader's own where it was read, else 3 x image_size^2
    bytes (what dataperf's decode delivers)."""
    if opts.image_shape:
        return tuple(opts.image_shape), getattr(torch, opts.image_dtype)
    return (3, opts.image_size, opts.image_size), torch.uint8


def input_label(opts: StepOptions, kind: str) -> str:
    """The step's input in its config key: tokens by length; images by side, or by the loader's own shape."""
    if kind == "tokens":
        return f"L={opts.seq_len}"
    if opts.image_shape:
        return f"S={'x'.join(map(str, opts.image_shape))}:{opts.image_dtype}"
    return f"S={opts.image_size}"


class Trainer:
    """One model, its optimizer, and the train step every measurement (step, e2e, profile) shares."""

    def __init__(self, opts: StepOptions):
        from dataperf.measure.guards import NanGuard, seed_everything

        seed_everything(opts.seed, opts.deterministic)
        self.opts = opts
        self.device = resolve_device(opts.device)
        model = load_model(opts.model)
        self.kind = opts.input or input_kind(model)
        if self.kind not in ("tokens", "image"):
            raise UserError(f"--input must be tokens or image, got {self.kind!r}")
        self.params_m = sum(p.numel() for p in model.parameters()) / 1e6  # before ZeRO-3 partitions them
        self.engine = None
        if opts.optimizer in ZERO_CHOICES:  # DeepSpeed places (and for stage 3 partitions) the model itself
            from dataperf.measure.zero import engine

            self.engine = engine(opts.optimizer, model, self.device.type, opts.batch_size, opts.amp == "bf16")
            self.model, self.optimizer = self.engine, self.engine.optimizer
        else:
            self.model = model.to(self.device)
            self.optimizer = make_optimizer(opts.optimizer, self.model)
        self.guard = NanGuard(self.model, opts.nan_guard_dir, self.optimizer) if opts.nan_guard_dir else None
        self.steps_done = 0

    def synthetic_batch(self, batch_size: int | None = None, seq_len: int | None = None):
        b = batch_size or self.opts.batch_size
        if self.kind == "tokens":
            vocab = getattr(self.model, "vocab", self.opts.vocab)
            x = torch.randint(0, vocab, (b, seq_len or self.opts.seq_len), device=self.device)
        else:
            shape, dtype = image_input(self.opts)
            x = (torch.rand((b, *shape), dtype=dtype, device=self.device) if dtype.is_floating_point else
                 torch.randint(0, 256, (b, *shape), dtype=dtype, device=self.device))
        return x, torch.randint(0, 1000, (b,), device=self.device)

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """uint8 images to normalised float on the device (done in the step, as real pipelines do)."""
        return x.float().div_(255.0) if x.dtype == torch.uint8 else x

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The model's forward and loss on a batch. A user's model (MODULE:FACTORY) that fails on it is named
        with the batch it was given and its own message: its code, not a dataperf bug."""
        try:
            return loss_of((self.engine if self.engine is not None else self.model)(self.prepare(x)), x, y)
        except Exception as e:
            if self.opts.model in BUILTIN or is_oom(e):
                raise
            what = f"images {list(x.shape)} (uint8, scaled to float in [0, 1])" if self.kind == "image" else \
                f"tokens {list(x.shape)} ({x.dtype})"
            raise UserError(f"--model {self.opts.model}: its forward failed on a batch of {what}: "
                            f"{type(e).__name__}: {' '.join(str(e).split())}; make the model take that input, or "
                            "change --input, --batch-size, --image-size or --seq-len") from None

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.engine is not None:  # bf16 is DeepSpeed's own (bf16 weights, fp32 master), not autocast
            loss = self.loss(x, y)
            self.engine.backward(loss)
            self.steps_done += 1
            self.engine.step()
            return loss
        with record_function("forward"):
            if self.opts.amp == "bf16":
                with torch.autocast(self.device.type, dtype=torch.bfloat16):
                    loss = self.loss(x, y)
            else:
                loss = self.loss(x, y)
        with record_function("backward"):
            loss.backward()
        if self.guard is not None:
            self.guard.check(self.steps_done)
        self.steps_done += 1
        with record_function("optimizer"):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return loss

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


class MemorySampler:
    """Peak host RSS, and on CUDA the peak device memory NVML reports (it sees what the allocator hides:
    the CUDA context, cuBLAS workspaces, fragmentation)."""

    def __init__(self, device: torch.device, interval_s: float = 0.02):
        self.device = device
        self.interval_s = interval_s
        self.rss_peak = 0
        self.nvml_peak: int | None = None
        self.nvml_why: str | None = None
        self._stop = threading.Event()
        self._handle = None
        if device.type == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                idx = device.index if device.index is not None else torch.cuda.current_device()
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(idx)
                self._nvml = pynvml
                self.nvml_peak = 0
            except Exception as e:  # nvidia-ml-py missing or NVML not usable
                self.nvml_why = f"NVML unavailable: {type(e).__name__}: {e}"

    def _sample(self) -> None:
        self.rss_peak = max(self.rss_peak, psutil.Process().memory_info().rss)
        if self._handle is not None:
            used = self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used
            self.nvml_peak = max(self.nvml_peak or 0, used)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> MemorySampler:
        self._sample()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self._sample()


def oom_error(e: BaseException, opts: StepOptions) -> UserError:
    """A clear OOM message; on CUDA the allocator's memory summary is saved and named."""
    hint = f"batch {opts.batch_size}" + (f" x {opts.seq_len} tokens" if opts.seq_len else "")
    if isinstance(e, torch.cuda.OutOfMemoryError):
        d = opts.results_dir or Path("results")
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"cuda-oom-{opts.model.replace(':', '_').replace('/', '_')}-bs{opts.batch_size}.txt"
        path.write_text(torch.cuda.memory_summary())
        torch.cuda.empty_cache()
        return UserError(f"CUDA out of memory at {hint}; memory summary written to {path}; "
                         "lower --batch-size / --seq-len, or try --optimizer adam8bit or --amp bf16")
    return UserError(f"out of host memory at {hint}: {e}; lower --batch-size / --seq-len")


def is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.cuda.OutOfMemoryError) or (
        isinstance(e, RuntimeError) and ("can't allocate memory" in str(e) or "out of memory" in str(e)))


def measure_step(opts: StepOptions) -> StepResult:
    """Warm-up, then `repeats` x `steps` timed steps. A repeat's ms/step is its steps' mean (their total over
    their count, as training pays them: a late step and the quick ones after it are one cost); the headline is
    the median over repeats (a repeat a one-off preemption hit is dropped), as is peak memory."""
    if opts.batch_size <= 0 or opts.steps <= 0 or opts.repeats <= 0:
        raise UserError("--batch-size, --steps and --repeats must be positive")
    try:
        return _measure_step(opts)
    except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
        if is_oom(e):
            raise oom_error(e, opts) from None
        raise


def timed_steps(tr: Trainer, x: torch.Tensor, y: torch.Tensor, steps: int) -> list[float]:
    """Milliseconds of each step. On CUDA each step is bracketed by events and read after one final sync,
    keeping the queue full."""
    if tr.device.type == "cuda":
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        ev[0].record()
        for i in range(steps):
            tr.step(x, y)
            ev[i + 1].record()
        tr.sync()
        return [ev[i].elapsed_time(ev[i + 1]) for i in range(steps)]
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        tr.step(x, y)
        out.append((time.perf_counter() - t0) * 1000)
    return out


H2D_COPIES = 5


def batch_copy_ms(x: torch.Tensor, y: torch.Tensor, device: torch.device) -> tuple[float, float]:
    """Milliseconds to copy one input batch to the device from pinned and from pageable host memory (median of
    H2D_COPIES each, synchronised), as the fed loop copies it (fed.to_device): what a fed step costs beyond the
    step alone, and what pin_memory saves."""
    pageable = [t.to("cpu") for t in (x, y)]
    out = []
    for host in ([t.pin_memory() for t in pageable], pageable):
        ms = []
        for _ in range(H2D_COPIES):
            torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            for t in host:
                t.to(device, non_blocking=True)
            torch.cuda.synchronize(device)
            ms.append((time.perf_counter() - t0) * 1000)
        out.append(statistics.median(ms))
    return out[0], out[1]


def _measure_step(opts: StepOptions) -> StepResult:
    tr = Trainer(opts)
    x, y = tr.synthetic_batch()
    for _ in range(opts.warmup):
        tr.step(x, y)
    tr.sync()
    res = StepResult(model=opts.model, device=str(tr.device), optimizer=opts.optimizer, batch_size=opts.batch_size,
                     seq_len=opts.seq_len if tr.kind == "tokens" else None,
                     image_size=opts.image_size if tr.kind == "image" and not opts.image_shape else None,
                     image_shape=list(opts.image_shape) if tr.kind == "image" and opts.image_shape else None,
                     image_dtype=opts.image_dtype if tr.kind == "image" and opts.image_shape else None,
                     params_m=tr.params_m)
    res.config_key = f"{opts.model}|{tr.device.type}|{opts.optimizer}|bs={opts.batch_size}|" \
                     f"{input_label(opts, tr.kind)}|amp={opts.amp}"
    cuda = tr.device.type == "cuda"
    ms, mem, rss, alloc, nvml, busy = [], [], [], [], [], []
    nvml_why = None
    for _ in range(opts.repeats):
        if cuda:
            torch.cuda.reset_peak_memory_stats(tr.device)
        with MemorySampler(tr.device, opts.nvml_interval_s) as sampler:
            c0, w0 = time.process_time(), time.perf_counter()
            ms.append(statistics.fmean(timed_steps(tr, x, y, opts.steps)))
            busy.append((time.process_time() - c0) / max(time.perf_counter() - w0, 1e-9))
        rss.append(sampler.rss_peak / MIB)
        if cuda:
            alloc.append(torch.cuda.max_memory_allocated(tr.device) / MIB)
            if sampler.nvml_peak is not None:
                nvml.append(sampler.nvml_peak / MIB)
            nvml_why = sampler.nvml_why
        mem.append(alloc[-1] if cuda else rss[-1])
    s = summarize(ms)
    res.repeats, res.steps_per_repeat = opts.repeats, opts.steps
    res.step_ms_median, res.step_ms_min, res.step_ms_max, res.step_ms_repeats = s["median"], s["min"], s["max"], ms
    res.samples_per_s_repeats = [opts.batch_size / (m / 1000) for m in ms]
    # pooled, as training pays: a step held up and the quick ones that pay it back are one cost wherever the
    # repeats' edges fall (under load a hold's payback spilled into the next repeat: repeats of 93, 23 and 36 ms
    # for 50 each, a median of 36 read 112 samples/s for 80; the pooled mean read 51 ms, 79)
    res.step_ms_mean = statistics.fmean(ms)
    res.samples_per_s = opts.batch_size / (res.step_ms_mean / 1000)
    if tr.kind == "tokens":
        res.tokens_per_s = res.samples_per_s * opts.seq_len
    res.cpu_cores_busy_median = summarize(busy)["median"]
    res.peak_mem_mib_repeats = mem
    res.peak_mem_mib = summarize(mem)["median"]
    res.peak_rss_mib = summarize(rss)["median"]
    if cuda:
        pinned_ms, pageable_ms = batch_copy_ms(x, y, tr.device)
        mib = (x.nbytes + y.nbytes) / MIB
        res.h2d_pinned_ms_per_mib, res.h2d_pageable_ms_per_mib = pinned_ms / mib, pageable_ms / mib
        res.input_mib_per_sample = mib / opts.batch_size
        res.cuda_max_allocated_mib = summarize(alloc)["median"]
        res.nvml_peak_used_mib = summarize(nvml)["median"] if nvml else None
        if nvml_why:
            res.notes.append(nvml_why)
        res.notes.append("peak_mem_mib is torch.cuda.max_memory_allocated; NVML's figure adds the CUDA "
                         "context and allocator cache")
    else:
        res.notes.append("peak_mem_mib is the process's peak RSS (CPU run)")
    if s["spread_pct"] > HIGH_SPREAD_PCT:
        res.notes.append(f"high spread: step times differ by {s['spread_pct']:.0f}% of the median")
    return res
