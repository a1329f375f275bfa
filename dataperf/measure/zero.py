"""ZeRO through DeepSpeed's own engine (deepspeed.initialize), with a config dict dataperf builds.

CPU offload uses DeepSpeedCPUAdam (JIT-built with ninja and a C++ compiler on first use), the optimizer DeepSpeed
itself picks for offload: torch's AdamW on host tensors would make offloaded steps look slower than users see.
"""

from __future__ import annotations

import os
import socket

from torch import nn

from dataperf.errors import UserError

# name -> (stage, offload optimizer state, offload parameters, client optimizer)
CHOICES: dict[str, tuple[int, bool, bool, str]] = {
    "zero2": (2, False, False, "adamw"),
    "zero2-offload": (2, True, False, "cpuadam"),
    "zero3": (3, False, False, "adamw"),
    "zero3-offload": (3, True, True, "cpuadam"),
    "zero2-adam8bit": (2, False, False, "adam8bit"),
}


def ds_config(name: str, micro_batch: int, bf16: bool) -> dict:
    """The DeepSpeed config for one choice; bf16 weights and grads with fp32 master state when bf16."""
    stage, off_opt, off_param, client = CHOICES[name]
    zo: dict = {"stage": stage}
    if off_opt:
        zo["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if off_param:
        zo["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {"train_micro_batch_size_per_gpu": micro_batch, "gradient_accumulation_steps": 1,
            "bf16": {"enabled": bf16}, "zero_optimization": zo, "steps_per_print": 10**9,
            "zero_allow_untested_optimizer": client == "adam8bit", "wall_clock_breakdown": False}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def single_process_env() -> None:
    """DeepSpeed needs a process group; outside torchrun, one rank on this host."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "RANK": "0",
                       "LOCAL_RANK": "0", "WORLD_SIZE": "1"})


def client_optimizer(kind: str, model: nn.Module, lr: float):
    if kind == "cpuadam":
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(model.parameters(), lr=lr)
    if kind == "adam8bit":
        try:
            import bitsandbytes as bnb
        except Exception as e:
            raise UserError(f"zero2-adam8bit needs bitsandbytes ({type(e).__name__}: {e}); "
                            "pip install bitsandbytes") from None
        return bnb.optim.AdamW8bit(model.parameters(), lr=lr)
    import torch

    return torch.optim.AdamW(model.parameters(), lr=lr)


def engine(name: str, model: nn.Module, device_type: str, micro_batch: int, bf16: bool, lr: float = 1e-4):
    """deepspeed.initialize on `model`; returns the engine (it is the model and the optimizer step)."""
    if name not in CHOICES:
        raise UserError(f"unknown ZeRO choice {name!r}; choose {', '.join(CHOICES)}")
    if device_type != "cuda" and os.environ.get("DS_ACCELERATOR") != "cpu":
        raise UserError(f"--optimizer {name} runs DeepSpeed on CUDA; use --device cuda "
                        "(or DS_ACCELERATOR=cpu to try DeepSpeed's CPU accelerator)")
    try:
        import deepspeed
    except Exception as e:
        raise UserError(f"--optimizer {name} needs DeepSpeed ({type(e).__name__}: {e}); "
                        "pip install 'dataperf[deepspeed]'") from None
    single_process_env()
    if not deepspeed.comm.is_initialized():
        deepspeed.init_distributed(dist_backend="nccl" if device_type == "cuda" else "gloo")
    opt = client_optimizer(CHOICES[name][3], model, lr)
    eng, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(name, micro_batch, bf16))
    return eng
