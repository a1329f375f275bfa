"""Ray Data as a loader backend: the dataset's sample references -> `map_batches` (read + decode + the same
--transform, in Ray tasks on whatever nodes the cluster has) -> `iter_torch_batches`, timed by the same trial.

Where it runs (`LoaderConfig.ray_cluster`): None, a local Ray dataperf starts sized to this machine; "simulated:NxC",
N CPU-only nodes of C CPUs each on this machine (`ray.cluster_utils.Cluster`, a head of 0 CPUs: no task runs on it);
"auto" or "HOST:PORT" or "ray://HOST:PORT", the user's own cluster, joined. One Ray session per process, kept from
trial to trial while the cluster asked for stays the same (a start costs 5-10 s on a 2-core box), and started again
when it changes or lost a node.

Each sample carries its stage books (read, decode, transform, booked inside the Ray task that loaded it) to the
consumer; the collate (Ray's `collate_fn`, on Ray's iterator threads in this process) books its own and stamps the
batch's done time, so the hand-over is timed as for every backend. A map task that dies is not retried
(`max_retries=0`): the trial fails with Ray's reason instead of hiding a lost node inside a slower rate.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import re
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dataperf import stages
from dataperf.backends import Prepared
from dataperf.backends.samples import SampleRef, sample_refs
from dataperf.data.manifest import Manifest
from dataperf.errors import TrialError, UserError
from dataperf.results import LoaderConfig

INSTALL = "pip install 'dataperf[ray]' (ray[data]==2.60.0)"
CONNECT_S = 30.0  # the longest a cluster address is waited for before an error
PROBE_S = 5.0  # a TCP connect to the address's port, before Ray is asked (Ray's own connect retries for minutes)
MIN_STORE_MIB = 80  # Ray refuses an object store under 75 MB
SIMULATED = re.compile(r"^simulated:(\d+)x(\d+)$")
# Ray's loggers: their INFO and WARNING lines (each dataset's "execution finished", deprecations) go to stderr
# between dataperf's own lines; kept to errors
RAY_LOGGERS = ("ray", "ray.data", "ray.util", "ray._private")


@dataclass(frozen=True)
class Cluster:
    """Where the pipeline runs: a local Ray (kind local), N simulated nodes of C CPUs, or an address joined."""

    kind: str  # local | simulated | address
    nodes: int = 0
    node_cpus: int = 0
    address: str = ""

    @classmethod
    def of(cls, spec: str | None) -> Cluster:
        if spec is None:
            return cls("local")
        m = SIMULATED.match(spec)
        if m:
            return cls("simulated", int(m.group(1)), int(m.group(2)))
        return cls("address", address=spec)

    def describe(self) -> str:
        if self.kind == "local":
            return "local Ray started by dataperf on this machine"
        if self.kind == "simulated":
            return f"simulated: {self.nodes} CPU-only nodes x {self.node_cpus} CPUs on this machine"
        return f"cluster at {self.address}"


def cluster_spec(address: str | None, nodes: int | None, node_cpus: int | None) -> str | None:
    """--ray-address / --ray-nodes --ray-node-cpus as the config's `ray_cluster`, refused when they cannot work."""
    if address and (nodes or node_cpus):
        raise UserError("--ray-address joins a cluster and --ray-nodes/--ray-node-cpus simulate one: give one of the "
                        "two")
    if address:
        return address.strip()
    if nodes is None and node_cpus is None:
        return None
    if nodes is None or node_cpus is None:
        raise UserError("--ray-nodes N and --ray-node-cpus C go together (N simulated nodes of C CPUs each); "
                        "give both, e.g. --ray-nodes 2 --ray-node-cpus 2")
    if nodes < 1 or node_cpus < 1:
        raise UserError(f"--ray-nodes and --ray-node-cpus must be at least 1, got {nodes} and {node_cpus}")
    return f"simulated:{nodes}x{node_cpus}"


def import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise TrialError(f"Ray Data is not installed ({e}); {INSTALL}") from None
    return ray


def check(cfg: LoaderConfig) -> None:
    """Before any trial (preflight): Ray importable, and a cluster address that answers within CONNECT_S; each
    refused with one `error:` line (exit 2)."""
    try:
        import_ray()
    except TrialError as e:
        raise UserError(str(e)) from None
    cluster = Cluster.of(cfg.ray_cluster)
    if cluster.kind == "address":
        probe(cluster.address)
    if knob(cfg, "ray_object_store_mib") < MIN_STORE_MIB:
        raise UserError(f"--ray-object-store must be at least {MIN_STORE_MIB} MiB (Ray refuses a smaller store), "
                        f"got {cfg.ray_object_store_mib}")


def probe(address: str) -> None:
    """A TCP connect to HOST:PORT (or ray://HOST:PORT) within PROBE_S: an address that does not answer is an error
    now, not a connect Ray would retry for minutes. "auto" names no port: Ray looks it up on this host, bounded by
    `session` instead."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray-address {address!r} is not auto, HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S):
            pass
    except OSError as e:
        raise UserError(f"the Ray cluster at {address} does not answer ({e.strerror or e}); start it (ray start "
                        "--head) or give its address: --ray-address auto|HOST:PORT|ray://HOST:PORT") from None


def knob(cfg: LoaderConfig, name: str) -> Any:
    """A ray knob's value in cfg, its declared one-run value where the config leaves it unset (a config built in
    code, not from the options)."""
    value = getattr(cfg, name)
    return LoaderConfig.__dataclass_fields__[name].metadata["single"] if value is None else value


class _Session:
    """This process's one Ray session: the cluster it was started or joined for and its object store size."""

    key: tuple | None = None
    cluster: Any = None  # ray.cluster_utils.Cluster of a simulated cluster
    info: dict[str, Any] = {}
    started = 0  # sessions started in this process: objects put in an earlier one are gone


def quiet() -> None:
    """Ray's own log lines kept out of dataperf's output: its Python loggers to errors, its C++ core worker in this
    process to fatal (an abandoned execution's "Attempting to recover N lost objects" otherwise lands between
    dataperf's lines; read when ray.init starts the core worker); Data's progress bars are turned off once a
    session runs."""
    for name in RAY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")


@contextlib.contextmanager
def _no_stderr() -> Iterator[None]:
    """File descriptor 2 sent to /dev/null while Ray starts: its core worker says which log level it read from the
    environment there, at a level no setting silences. What fails raises; nothing of dataperf's prints meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def session(cfg: LoaderConfig) -> dict[str, Any]:
    """Ray running for cfg's cluster (started, joined, or kept from the last trial), and what it is: its kind,
    nodes, CPUs. A simulated or local cluster that lost a node since is started again."""
    ray = import_ray()
    quiet()
    cluster = Cluster.of(cfg.ray_cluster)
    store = knob(cfg, "ray_object_store_mib") if cluster.kind != "address" else None
    key = (cluster, store)
    if _Session.key == key and ray.is_initialized() and _alive_nodes(ray) >= _Session.info.get("ray_nodes", 0):
        return _Session.info
    shutdown()
    with _no_stderr():
        _start(ray, cluster, store)
    # at exit, before the handlers Ray registered as it started the nodes (atexit runs the last registered first):
    # theirs kill the raylets under a driver still connected, whose core worker then exits the process with code 1
    atexit.unregister(shutdown)
    atexit.register(shutdown)
    quiet()
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
    _Session.key = key
    _Session.started += 1
    _Session.info = {"cluster": cluster.describe(), "cluster_kind": cluster.kind, "ray_version": ray.__version__,
                     "ray_nodes": len(nodes), "ray_cpus": int(sum(n["Resources"]["CPU"] for n in nodes))}
    if cluster.kind == "simulated":
        _Session.info["ray_node_cpus"] = cluster.node_cpus
    if cluster.kind != "address":  # a joined cluster's raylets read their own environment
        _Session.info["ray_worker_niceness"] = int(os.environ.get(RAY_NICENESS_ENV, RAY_NICENESS_DEFAULT))
    return _Session.info


# Ray starts its workers at nice 15 unless RAY_worker_niceness says otherwise (read by each raylet from the
# environment it starts in): they yield to the training process, and beside any other busy process at nice 0 they
# get a few % of a core. dataperf measures Ray as users run it, and records the niceness of a Ray it starts.
RAY_NICENESS_ENV, RAY_NICENESS_DEFAULT = "RAY_worker_niceness", 15


def _start(ray, cluster: Cluster, store: int | None) -> None:
    """Ray started (or joined) for `cluster`: a simulated one's head holds no CPU, so no task runs beside the
    driver's own processes; a local one is sized to this process's cores."""
    if cluster.kind == "address":
        _join(ray, cluster.address)
    elif cluster.kind == "simulated":
        from ray.cluster_utils import Cluster as SimCluster

        mib = (store or MIN_STORE_MIB) * 2**20
        sim = SimCluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": mib,
                                                                "include_dashboard": False})
        for _ in range(cluster.nodes):
            sim.add_node(num_cpus=cluster.node_cpus, object_store_memory=mib)
        _Session.cluster = sim
        ray.init(address=sim.address, log_to_driver=False, logging_level=logging.ERROR)
    else:
        # address="local": a Ray of its own, never one found running on this machine (ray.init() would join it)
        ray.init(address="local", num_cpus=_usable_cores(), object_store_memory=(store or MIN_STORE_MIB) * 2**20,
                 include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)


def _usable_cores() -> int:
    """This process's cores (its affinity: taskset, cgroup cpusets), which a local Ray is sized to."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _alive_nodes(ray) -> int:
    """The session's CPU nodes alive: Ray's books, and a simulated cluster's own processes. Ray marks a node whose
    processes were killed dead only once its health checks fail (seconds, more on a loaded box); a trial that
    trusted its books meanwhile ran on a cluster still losing the node."""
    try:
        books = sum(1 for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0)
    except Exception:  # a session whose head went away: start again
        return -1
    sim = _Session.cluster
    if sim is None:
        return books
    return min(books, sum(1 for n in list(sim.worker_nodes) if n.remaining_processes_alive()))


def _join(ray, address: str) -> None:
    """ray.init on a thread, waited for CONNECT_S at most: Ray's connect to an address that stopped answering after
    the probe (or an "auto" that finds a dead cluster's file) retries far longer."""
    failed: list[BaseException] = []

    def connect() -> None:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except BaseException as e:  # handed to the waiting thread
            failed.append(e)

    t = threading.Thread(target=connect, daemon=True)
    t.start()
    t.join(CONNECT_S)
    if t.is_alive():
        raise UserError(f"the Ray cluster at {address} did not answer within {CONNECT_S:.0f} s; check it runs "
                        "(ray status) and give its address: --ray-address auto|HOST:PORT|ray://HOST:PORT")
    if failed:
        e = failed[0]
        line = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise UserError(f"could not join the Ray cluster at {address}: {line}; start one (ray start --head) or "
                        "give its address: --ray-address auto|HOST:PORT|ray://HOST:PORT") from None


def shutdown() -> None:
    """End this process's Ray session (and a simulated cluster's node processes), once no Ray Data iterator thread
    can call into it: one that does after ray.shutdown() makes Ray's core worker exit this process with code 1 and
    nothing printed (its line is below the fatal level `quiet` sets), which ended ray-size between two sizes."""
    if _Session.key is None:
        return
    import ray

    left = stop_iterators()
    if left:
        raise TrialError(f"{left} Ray Data iterator thread(s) of an earlier pipeline still call into Ray after "
                         f"{STOP_S:.0f} s; the Ray session cannot end safely: run again in a fresh process")
    ray.shutdown()
    if _Session.cluster is not None:
        _Session.cluster.shutdown()
    _Session.key, _Session.cluster, _Session.info = None, None, {}


atexit.register(shutdown)

STOP_S = 30.0  # the longest the threads of a closed Ray Data iterator are waited for
# Ray Data's threads a pipeline leaves behind (2.60): an iterator's format/collate workers ("iter_threaded"), which
# call ray.get until the iterator's generator is finalized, and a block prefetcher a pass ("Prefetcher"), parked
# for good once its pass is done unless stopped
ITER_THREADS, PREFETCH_THREADS = "iter_threaded", "Prefetcher"


def stop_iterators(wait_s: float = STOP_S) -> int:
    """The threads of every closed or abandoned Ray Data iterator in this process ended: a collection pass first
    (Ray's iterator generators sit in reference cycles, so dropping one does not run the `finally` that tells its
    workers to stop), the parked prefetchers told to stop, then each waited for; how many are still running after
    `wait_s`. Called before the session ends, not as each pass ends: a pass's end is inside its time (the last
    next() runs the pass's `finally`), and a collection there costs 0.1-0.3 s on a loaded 2-core box."""
    gc.collect()
    for t in threading.enumerate():
        if t.name == PREFETCH_THREADS:
            stop = getattr(getattr(getattr(t, "_target", None), "__self__", None), "stop", None)
            if callable(stop):
                stop()
    deadline = time.monotonic() + wait_s
    for t in threading.enumerate():
        if t.name in (ITER_THREADS, PREFETCH_THREADS):
            t.join(max(0.0, deadline - time.monotonic()))
    return sum(1 for t in threading.enumerate() if t.name in (ITER_THREADS, PREFETCH_THREADS))


# ---- the pipeline -------------------------------------------------------------------------------------------------

_decoders: dict[str, Any] = {}  # per Ray worker process: the SampleDecoder of a config, built once


def load_batch(batch: dict[str, np.ndarray], cfg: LoaderConfig, throttle_mib_s: float | None,
               sample_cost_s: float | None) -> dict[str, np.ndarray]:
    """One map_batches task: every referenced sample read (pread), paced (throttle: known answers), decoded and
    transformed like every backend does, with its seconds a stage. A corrupt sample skipped (on_corrupt=skip) keeps
    its row, flagged, for the collate to drop and count."""
    from dataperf.backends.dataloader import SampleDecoder, throttle

    key = cfg.key()
    decoder = _decoders.get(key) or _decoders.setdefault(key, SampleDecoder(cfg))
    rows: list[dict[str, Any]] = []
    for path, off, size, ext, label in zip(batch["path"], batch["offset"], batch["size"], batch["ext"],
                                           batch["label"], strict=True):
        t = time.perf_counter()
        with open(str(path), "rb") as f:
            payload = os.pread(f.fileno(), int(size), int(off))
        if len(payload) != size:
            raise TrialError(f"{path} is truncated: {len(payload)} of {size} bytes at {off}")
        throttle(int(size), throttle_mib_s, sample_cost_s)
        stages.book("read", t)
        out = decoder(str(ext), payload, int(label), str(path))
        out["stage_s"] = stages.take()
        rows.append(out)
    return _columns(rows)


def _columns(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Samples as Ray block columns: x (stacked, or one array a row for token sequences), y, nbytes, the stage
    seconds, a corrupt flag; raw samples as their payload bytes."""
    good = next((r for r in rows if "corrupt" not in r), None)
    out: dict[str, Any] = {
        "y": np.array([r.get("y", 0) for r in rows], dtype=np.int64),
        "nbytes": np.array([r.get("nbytes", 0) for r in rows], dtype=np.int64),
        "corrupt": np.array(["corrupt" in r for r in rows], dtype=np.bool_),
    }
    for s in ("read", "decode", "transform"):
        out[f"{s}_s"] = np.array([r.get("stage_s", {}).get(s, 0.0) for r in rows], dtype=np.float64)
    if good is None:
        return out
    if "payload" in good:
        out["payload"] = np.array([r.get("payload", b"") for r in rows], dtype=object)
    elif good["x"].dim() == 1:  # token sequences of their own lengths
        out["x"] = np.array([r["x"].numpy() if "x" in r else np.zeros(0, np.int64) for r in rows] + [None],
                            dtype=object)[:-1]
    else:
        blank = np.zeros_like(good["x"].numpy())
        out["x"] = np.stack([r["x"].numpy() if "x" in r else blank for r in rows])
    return out


def collate_fn() -> Any:
    """`collate` as the NumpyBatchCollateFn Ray 2.47+ asks iter_torch_batches for (a plain function is deprecated)."""
    from ray.data.collate_fn import NumpyBatchCollateFn

    class Collate(NumpyBatchCollateFn):
        def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
            return collate(batch)

    return Collate()


def collate(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """Ray's batch as every backend's batch dict ("n", "nbytes", "x", "y", its stage books and done time), one
    stream (worker -1); corrupt rows dropped and counted; token sequences right-padded as the DataLoader pads them."""
    import torch

    t = time.perf_counter()
    keep = ~batch["corrupt"]
    for s in ("read", "decode", "transform"):
        stages.add({s: float(batch[f"{s}_s"].sum())})
    out: dict[str, Any] = {"n": int(keep.sum()), "worker": -1, "nbytes": int(batch["nbytes"][keep].sum()),
                           "corrupt": int((~keep).sum())}
    if "payload" in batch:
        out["payload"] = list(batch["payload"][keep])
    elif "x" in batch:
        x = batch["x"][keep]
        if x.dtype == object:
            lengths = [len(s) for s in x]
            pad = torch.zeros(len(x), max(lengths, default=0), dtype=torch.long)
            for i, s in enumerate(x):
                pad[i, : len(s)] = torch.as_tensor(np.array(s, dtype=np.int64))  # Ray's arrays are read-only
            out["x"], out["lengths"], out["tokens"] = pad, torch.tensor(lengths, dtype=torch.long), sum(lengths)
        else:
            out["x"] = torch.from_numpy(np.ascontiguousarray(x))
        out["y"] = torch.from_numpy(batch["y"][keep].copy())
    return stages.stamp(out, t)


class RayLoader:
    """One Ray Data pipeline per repeat (a dataset is a plan; each iteration executes it anew), over this rank's
    samples in the order of an access.Order, continued across repeats."""

    def __init__(self, root: Path, m: Manifest, cfg: LoaderConfig, opts: Any, prep: Prepared):
        from dataperf.backends.order import Order

        if cfg.batch_size <= 0:
            raise TrialError(f"batch_size must be positive, got {cfg.batch_size}")
        self.cfg, self.opts, self.info = cfg, opts, prep.info
        self.refs: list[SampleRef] = sample_refs(root, m)
        self.order = Order(len(self.refs), cfg.shuffle, opts.seed, opts.rank, opts.world_size)
        self.dataset: Any = None  # the last repeat's, for its stats
        self.source: tuple[int, Any] | None = None  # (the session it was put in, the references as a Ray dataset)

    def blocks(self) -> Any:
        """The samples' references as a Ray dataset of one block a map batch, in the trial's seeded order (one pass
        of access.Order), put in the object store once a trial (a put costs 10-30 ms a block on a 2-core box: per
        repeat, seconds of the repeat's start-up that are dataperf's, not Ray's). Every repeat executes the
        pipeline over it anew from its start: a cold trial evicts the files before each repeat all the same."""
        ray = import_ray()
        if self.source is not None:
            return self.source[1]
        refs = [self.refs[i] for i in self.order]
        items = {"path": np.array([r.path for r in refs], dtype=object),
                 "offset": np.array([r.offset for r in refs], dtype=np.int64),
                 "size": np.array([r.size for r in refs], dtype=np.int64),
                 "ext": np.array([r.ext for r in refs], dtype=object),
                 "label": np.array([r.label for r in refs], dtype=np.int64)}
        map_batch = knob(self.cfg, "ray_map_batch")
        import pyarrow as pa

        table = pa.table(items)  # a block a map batch, made here: a repartition is an all-to-all Ray would time
        ds = ray.data.from_arrow([table.slice(i, map_batch) for i in range(0, len(refs), map_batch)])
        self.source = (_Session.started, ds)
        return ds

    def pipeline(self) -> Any:
        """read (the references) -> map_batches(read + decode + transform), one task a block."""
        ray = import_ray()
        cfg = self.cfg
        source = self.blocks()
        with warnings.catch_warnings():  # max_retries has no named parameter yet (2.60): ray_remote_args it is
            warnings.filterwarnings("ignore", message=".*ray_remote_args. is deprecated")
            return source.map_batches(load_batch, batch_size=knob(cfg, "ray_map_batch"), batch_format="numpy",
                                      compute=ray.data.TaskPoolStrategy(size=knob(cfg, "ray_concurrency")),
                                      num_cpus=knob(cfg, "ray_num_cpus"), max_retries=0, zero_copy_batch=False,
                                      fn_kwargs={"cfg": cfg, "throttle_mib_s": self.opts.throttle_mib_s,
                                                 "sample_cost_s": self.opts.sample_cost_s})

    def __iter__(self) -> Iterator[dict[str, Any]]:
        put_in = self.source[0] if self.source is not None else None
        session(self.cfg)
        if put_in is not None and put_in != _Session.started:  # started again: a node was lost after the last pass
            raise TrialError("a Ray node was lost between two repeats (the cluster was started again for this one); "
                             "no rate is reported for a trial whose repeats ran on different clusters")
        if not self.refs:
            return
        self.dataset = ds = self.pipeline()
        batches = iter(ds.iter_torch_batches(batch_size=self.cfg.batch_size, device="cpu", collate_fn=collate_fn(),
                                             prefetch_batches=knob(self.cfg, "ray_prefetch_batches")))
        t0 = time.perf_counter()
        first: float | None = None
        watch = NodeWatch(_Session.info.get("ray_nodes", 0))
        try:
            for b in batches:
                if first is None:
                    first = time.perf_counter() - t0
                if watch.lost:
                    raise TrialError(watch.reason())
                yield b
            watch.check()
            if watch.lost:
                raise TrialError(watch.reason())
        finally:
            watch.stop()
            getattr(batches, "close", lambda: None)()  # Ray's iterator closed: its execution shut down
            batches = None
            self._stats(ds, first)
            _settle()


    def _stats(self, ds: Any, first_s: float | None) -> None:
        """Ray's own books of the repeat that just ran (Dataset.stats()), kept in the record's backend info beside
        the time to first batch this side saw: the last repeat's (verdict.ray.cross_check reads them)."""
        try:
            text = ds.stats()
        except Exception as e:  # an execution cut short may have no stats: said, not invented
            self.info["ray_stats"] = {"error": f"{type(e).__name__}: {e}"[:200]}
            return
        stats = parse_stats(text)
        stats["first_batch_s_seen"] = first_s
        self.info["ray_stats"] = stats


WATCH_S = 0.5  # how often a pass asks Ray how many of its nodes are alive


class NodeWatch:
    """The nodes of a Ray dataperf started (local or simulated), counted on a thread every WATCH_S while a pass runs:
    a node lost mid-pass whose tasks had all finished raises nothing in Ray (the other nodes take its work), and
    the trial would report the rate of a cluster that shrank under it. A joined cluster is not watched: its nodes
    come and go with others' work (autoscaling)."""

    def __init__(self, nodes: int):
        self.nodes, self.alive = nodes, nodes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if nodes and _Session.info.get("cluster_kind") != "address":
            self._thread = threading.Thread(target=self._run, name="dataperf-ray-nodes", daemon=True)
            self._thread.start()

    @property
    def lost(self) -> bool:
        return 0 <= self.alive < self.nodes

    def check(self) -> None:
        if self._thread is not None:
            self.alive = _alive_nodes(import_ray())

    def reason(self) -> str:
        return (f"a Ray node was lost mid-pass: {self.alive} of {self.nodes} nodes alive (the node died, was killed "
                "or ran out of memory); no rate is reported for a cluster that shrank under the trial")

    def _run(self) -> None:
        while not self._stop.wait(WATCH_S):
            self.check()
            if self.lost:
                return

    def stop(self) -> None:
        """Ended before the pass's iterator closes: no thread of a pass calls into Ray after it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


SETTLE_S = 30.0


def _settle() -> None:
    """After a repeat cut short (untimed: the trial's clock stopped at its last batch), wait until the CPUs of a Ray
    dataperf started are free again: map tasks of the abandoned execution still running would hold their workers,
    and the next repeat would start new worker processes (seconds each: Python, Ray, torch) into its time to first
    batch."""
    import ray

    if _Session.info.get("cluster_kind") == "address":  # a joined cluster's CPUs may be busy with others' work
        return
    t = time.monotonic()
    while time.monotonic() - t < SETTLE_S:
        try:
            if ray.available_resources().get("CPU", 0) >= ray.cluster_resources().get("CPU", 0):
                return
        except Exception:  # a session that went away: the next repeat starts it again
            return
        time.sleep(0.05)


UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_OP = re.compile(r"^Operator \d+ (?P<name>.+?): (?P<tasks>\d+) tasks executed, (?P<blocks>\d+) blocks produced in "
                 r"(?P<wall>[\d.]+)s", re.M)
_TOTAL = r"\* {what}: .*?(?P<v>[\d.]+)(?P<u>us|ms|s) total"
_ROWS = re.compile(r"\* Output num rows per block: .*?(?P<n>\d+) total")
_ITER = {"first_batch_s": r"Time to first batch|time to first batch",
         "blocked_s": r"Total time user thread is blocked by Ray Data iter_batches"}


def parse_stats(text: str) -> dict[str, Any]:
    """Dataset.stats()'s text as numbers: each operator's wall time, its tasks' summed wall and CPU seconds and its
    rows; the iterator's time to first batch and time the consumer was blocked, where Ray printed them; and the
    lines that name backpressure."""
    ops: dict[str, dict[str, float]] = {}
    spans = list(_OP.finditer(text))
    for i, m in enumerate(spans):
        body = text[m.end(): spans[i + 1].start() if i + 1 < len(spans) else len(text)]
        op: dict[str, float] = {"tasks": int(m["tasks"]), "wall_s": float(m["wall"])}
        for key, what in (("task_wall_s", "Remote wall time"), ("task_cpu_s", "Remote cpu time")):
            t = re.search(_TOTAL.format(what=what), body)
            if t:
                op[key] = float(t["v"]) * UNITS[t["u"]]
        rows = _ROWS.search(body)
        if rows:
            op["rows"] = int(rows["n"])
        ops[m["name"]] = op
    out: dict[str, Any] = {"operators": ops}
    for key, label in _ITER.items():
        m = re.search(rf"(?:{label})[^\n]*?(?P<v>[\d.]+)(?P<u>us|ms|s)", text)
        if m:
            out[key] = float(m["v"]) * UNITS[m["u"]]
    out["backpressure"] = [ln.strip("* \t") for ln in text.splitlines() if "backpressure" in ln.lower()][:6]
    return out


def prepare(root: Path, m: Manifest, cfg: LoaderConfig) -> Prepared:
    """The Ray session for cfg's cluster (said in the record), and what is and is not collected there."""
    info = dict(session(cfg))
    notes = [f"Ray Data on the {info['cluster']}: {info['ray_nodes']} node(s), {info['ray_cpus']} CPUs; "
             f"map_batches tasks are not retried (a lost task fails the trial)"]
    if info["cluster_kind"] == "address":
        notes.append("footprint (cores busy, PSS) counts this process only: the Ray nodes of a joined cluster are "
                     "not collected; the dataset's files must be readable at the same paths on every node")
    else:
        notes.append("footprint (cores busy, PSS) counts this process's tree, which holds the Ray processes "
                     "dataperf started on this host (raylets, Ray's workers); no per-worker ids: one stream")
    ignored = ["ray_object_store_mib"] if info["cluster_kind"] == "address" else []
    if ignored:
        notes.append("--ray-object-store sizes a Ray dataperf starts; a joined cluster keeps its own")
    return Prepared(m.paths(root), info=info, ignored=ignored, notes=notes)


def build(root: Path, m: Manifest, cfg: LoaderConfig, opts: Any, prep: Prepared) -> RayLoader:
    return RayLoader(root, m, cfg, opts, prep)


def args(cfg: LoaderConfig) -> str:
    """The config in Ray's own terms, as a training script writes it."""
    where = Cluster.of(cfg.ray_cluster)
    nodes = f"; on {where.nodes} nodes of {where.node_cpus} CPUs" if where.kind == "simulated" else ""
    k = {name: knob(cfg, name) for name in ("ray_map_batch", "ray_concurrency", "ray_num_cpus",
                                            "ray_prefetch_batches", "ray_object_store_mib")}
    return (f"ds.map_batches(fn, batch_size={k['ray_map_batch']}, compute=ray.data.TaskPoolStrategy(size="
            f"{k['ray_concurrency']}), num_cpus={k['ray_num_cpus']}); ds.iter_torch_batches(batch_size="
            f"{cfg.batch_size}, prefetch_batches={k['ray_prefetch_batches']}); object_store_memory="
            f"{k['ray_object_store_mib']} MiB{nodes}")
