import pytest
import torch

from dataperf.measure.guards import NanGuard, NonFiniteError, seed_everything
from dataperf.measure.step import StepOptions, Trainer


def test_guard_names_the_parameter_and_checkpoints(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with NanGuard(model, tmp_path, opt) as guard:
        for step in range(3):
            loss = model(torch.randn(8, 4)).sum()
            loss.backward()
            guard.check(step)
            opt.step()
            opt.zero_grad()
        with torch.no_grad():
            model[2].weight[0, 1] = float("nan")
        loss = model(torch.randn(8, 4)).sum()
        loss.backward()
        with pytest.raises(NonFiniteError) as e:
            guard.check(3)
    assert e.value.param == "2.weight" and e.value.step == 3
    assert "'2.weight'" in str(e.value) and "step 3" in str(e.value)
    ckpt = torch.load(e.value.checkpoint, weights_only=False)
    assert ckpt["step"] == 3 and ckpt["param"] == "2.weight" and "optimizer" in ckpt
    assert torch.isnan(ckpt["model"]["2.weight"][0, 1])


@pytest.mark.slow
def test_guard_catches_inf_gradient_in_the_training_step(tmp_path):
    tr = Trainer(StepOptions(model="cnn-small", batch_size=2, image_size=16, nan_guard_dir=tmp_path))
    x, y = tr.synthetic_batch()
    tr.step(x, y)
    tr.model.head.weight.register_hook(lambda g: g * float("inf"))
    with pytest.raises(NonFiniteError) as e:
        tr.step(x, y)
    assert e.value.param == "head.weight" and e.value.what == "gradient" and e.value.step == 1
    assert e.value.checkpoint.is_file()


@pytest.mark.slow
def test_deterministic_runs_repeat_exactly():
    def losses():
        tr = Trainer(StepOptions(model="gpt-tiny", batch_size=2, seq_len=16, seed=3, deterministic=True))
        x, y = tr.synthetic_batch()
        return [tr.step(x, y).item() for _ in range(3)]

    try:
        assert losses() == losses()
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_seed_everything_seeds_all_generators():
    import random

    import numpy as np

    seed_everything(11)
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    seed_everything(11)
    assert a == (random.random(), np.random.rand(), torch.rand(1).item())
