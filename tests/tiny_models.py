"""Models for tests that need a step much faster than any loader (so the loader is the bottleneck)."""

import torch


class Tiny(torch.nn.Module):
    input_kind = "image"

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 10)

    def forward(self, x):
        return self.lin(x.mean((2, 3)))


def tiny():
    return Tiny()


class Sleepy(Tiny):
    """A step of known length: forward sleeps STEP_S (no CPU), so the step rate is batch / STEP_S."""

    STEP_S = 0.05

    def forward(self, x):
        import time

        time.sleep(self.STEP_S)
        return super().forward(x)


def sleepy():
    return Sleepy()


class _NoParams(torch.nn.Module):
    input_kind = "image"

    def forward(self, x):
        return x.float().mean()


def no_params():
    """A model with nothing to train."""
    return _NoParams()


class Spinny(Tiny):
    """A step of known CPU cost: forward burns SPIN_CPU_S of this thread's CPU time, so alone it takes that long
    on a free core and longer when loader workers take the cores (30 ms: well past the head start the scheduler
    gives a thread that wakes from waiting on data, so a step competes for its whole length)."""

    SPIN_CPU_S = 0.03

    def forward(self, x):
        import time

        t0 = time.thread_time()
        while time.thread_time() - t0 < self.SPIN_CPU_S:
            pass
        return super().forward(x)


def spinny():
    return Spinny()
