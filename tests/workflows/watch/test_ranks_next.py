"""watch on a job of several ranks (torchrun) suggests `sweep --ranks G` with the job's own world size (issue 51):
workers per rank with every rank reading at once, each rank paced at the rate the job's model took batches."""

from __future__ import annotations

from dataperf.workflows.watch.results import PLACEHOLDER_MODEL, sweep_command


def loader(path) -> dict:
    return {"data_path": str(path), "dataset_type": "ImageFolder", "num_workers": 4, "prefetch_factor": 2,
            "batch_size": 8, "pin_memory": True, "persistent_workers": True}


def test_a_job_of_four_ranks_gets_sweep_ranks_4_paced_at_its_models_rate(datasets):
    step, notes = sweep_command(loader(datasets["image-files"]), 8, model_sps=250.0, world_size=4)
    assert step.startswith(f"dataperf sweep {datasets['image-files']} --ranks 4 --batch-size 8 --prefetch-factor 2")
    assert "--pin-memory on --persistent-workers on --step-rate 250" in step
    assert "--model" not in step and any("paced at 250 samples/s" in n for n in notes)


def test_without_a_step_rate_the_ranks_sweep_measures_the_model_once(datasets):
    step, notes = sweep_command(loader(datasets["image-files"]), 8, model=None, cuda=True, world_size=2)
    assert "--ranks 2" in step and f"--model {PLACEHOLDER_MODEL} --device cuda" in step
    assert "--step-rate" not in step


def test_a_single_process_job_keeps_the_plain_sweep(datasets):
    step, _ = sweep_command(loader(datasets["image-files"]), 8, model_sps=250.0)
    assert "--ranks" not in step
