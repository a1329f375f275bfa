"""LitData (Lightning's streaming format): the samples converted once with litdata.optimize() into its
chunk files, read back through StreamingDataset + StreamingDataLoader (a torch DataLoader: process workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataperf.backends import Prepared
from dataperf.backends.dataloader import SampleDecoder, collate, validate, worker_kwargs
from dataperf.backends.samples import SampleRef, Store, converted, raw_sample
from dataperf.data.manifest import Manifest
from dataperf.errors import TrialError
from dataperf.results import LoaderConfig

CHUNK_BYTES = "64MB"


def _write(refs: list[SampleRef], out: Path) -> None:
    """The samples written as LitData chunks. optimize() installs SIGINT and SIGTERM handlers that end the
    process with os._exit(0) and keeps them: they are put back after it, or a later Ctrl-C ended the sweep with
    exit 0 and no interrupted record."""
    import logging
    import signal
    import threading

    from litdata import optimize

    logging.getLogger("litdata").setLevel(logging.WARNING)
    main = threading.current_thread() is threading.main_thread()
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        # one worker: the conversion is a one-off cost reported as such, not something to parallelise here
        optimize(fn=raw_sample, inputs=refs, output_dir=str(out), chunk_bytes=CHUNK_BYTES, num_workers=1,
                 reorder_files=False, verbose=False, start_method="fork")
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def prepare(root: Path, m: Manifest, cfg: LoaderConfig) -> Prepared:
    store = converted(root, m, "litdata", _write)
    return Prepared(store.files(), store.info(), state=store)


def _dataset(store: Store, cfg: LoaderConfig, throttle_mib_s: float | None, seed: int,
             sample_cost_s: float | None = None):
    from litdata import StreamingDataset

    from dataperf.backends.dataloader import throttle

    class Decoded(StreamingDataset):
        """litdata's dataset with dataperf's decode applied per sample (in the worker)."""

        def __getitem__(self, index: Any) -> dict[str, Any]:
            s = super().__getitem__(index)
            throttle(len(s["payload"]), throttle_mib_s, sample_cost_s)
            return decoder(s["ext"], s["payload"], int(s["label"]))

    decoder = SampleDecoder(cfg)
    # litdata's own shuffle: chunks in a seeded order per epoch, samples shuffled within the chunks read
    return Decoded(input_dir=f"local:{store.path}", shuffle=cfg.shuffle, drop_last=False, seed=seed)


def build(root: Path, m: Manifest, cfg: LoaderConfig, opts: Any, prep: Prepared):
    from litdata import StreamingDataLoader

    validate(cfg)
    if opts.world_size > 1:
        raise TrialError("the litdata backend is measured on one rank here (litdata splits by its own "
                         "distributed env); run it without --nproc")
    ds = _dataset(prep.state, cfg, opts.throttle_mib_s, opts.seed, opts.sample_cost_s)
    if len(ds) != prep.state.samples:
        raise TrialError(f"litdata store holds {len(ds)} samples, the dataset {prep.state.samples}; delete "
                         f"{prep.state.path} to convert again")
    return StreamingDataLoader(ds, batch_size=cfg.batch_size, collate_fn=collate, **worker_kwargs(cfg))
