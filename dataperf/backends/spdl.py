"""SPDL (Meta's Scalable and Performant Data Loading): an asyncio pipeline whose stages run in a thread pool
(or, with --worker-type process, a process pool): read+decode with concurrency num_workers, aggregate into
batches, collate, and a sink buffer of prefetch_factor batches."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dataperf.backends import Prepared
from dataperf.backends.dataloader import collate
from dataperf.backends.samples import RankSamples
from dataperf.data.manifest import Manifest
from dataperf.results import LoaderConfig


class SpdlLoader(RankSamples):
    """One SPDL pipeline per epoch; its workers are threads of this process unless worker_type is process."""

    def _executor(self) -> Executor:
        n = self.cfg.num_workers
        return ProcessPoolExecutor(n) if self.worker_type == "process" else ThreadPoolExecutor(n)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from spdl.pipeline import PipelineBuilder

        executor = self._executor()
        pipe = (PipelineBuilder()
                .add_source(self.refs())
                .pipe(self.load, concurrency=self.cfg.num_workers, executor=executor, output_order="input")
                .aggregate(self.cfg.batch_size)
                .pipe(collate)
                .add_sink(self.cfg.prefetch_factor or 2)
                .build(num_threads=self.cfg.num_workers + 1))  # +1: the collate stage's thread
        try:
            with pipe.auto_stop():
                yield from pipe
        finally:
            executor.shutdown(wait=True, cancel_futures=True)


def build(root: Path, m: Manifest, cfg: LoaderConfig, opts: Any, prep: Prepared) -> SpdlLoader:
    return SpdlLoader(root, m, cfg, opts, prep.info["worker_type"])
