"""The ray backend's options and refusals that need no Ray running: a closed port, Ray missing, options that
cannot go together; Ray's stats text read as numbers."""

import socket
import sys
import time

import pytest
from click.testing import CliRunner

from dataperf.backends.ray import INSTALL, cluster_spec, parse_stats
from dataperf.cli import cli
from dataperf.errors import UserError
from dataperf.results import LoaderConfig


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_address_that_does_not_answer_is_one_error_line_within_30_s(datasets):
    pytest.importorskip("ray.data", reason="ray[data] not installed")
    t0 = time.monotonic()
    r = CliRunner().invoke(cli, ["bench", str(datasets["image-files"]), "--backend", "ray", "--ray-address",
                                 f"ray://127.0.0.1:{closed_port()}"])
    assert time.monotonic() - t0 < 30
    assert r.exit_code == 2, r.output
    assert "does not answer" in r.output and "Traceback" not in r.output, r.output


def test_ray_not_installed_exits_2_with_the_install_line(datasets, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    r = CliRunner().invoke(cli, ["bench", str(datasets["image-files"]), "--backend", "ray"])
    assert r.exit_code == 2, r.output
    assert INSTALL in " ".join(r.output.split()), r.output


@pytest.mark.parametrize("address,nodes,cpus,why", [
    ("auto", 2, 2, "give one of the two"),
    (None, 2, None, "go together"),
    (None, 0, 2, "at least 1"),
])
def test_cluster_options_that_cannot_go_together_are_refused(address, nodes, cpus, why):
    with pytest.raises(UserError, match=why):
        cluster_spec(address, nodes, cpus)


def test_cluster_options_name_where_the_pipeline_runs():
    assert cluster_spec(None, None, None) is None
    assert cluster_spec(None, 3, 2) == "simulated:3x2"
    assert cluster_spec("ray://h:10001", None, None) == "ray://h:10001"


def test_ray_options_without_the_ray_backend_are_refused(datasets):
    r = CliRunner().invoke(cli, ["bench", str(datasets["image-files"]), "--ray-nodes", "2", "--ray-node-cpus", "1"])
    assert r.exit_code == 2 and "--backend ray" in r.output, r.output


def test_a_simulated_cluster_is_written_in_the_config_cell():
    c = LoaderConfig(backend="ray", ray_concurrency=4, ray_num_cpus=1, ray_map_batch=64, ray_prefetch_batches=2,
                     ray_object_store_mib=512, ray_cluster="simulated:2x4")
    assert c.short().startswith("ray bs=32 conc=4 cpus=1 map_bs=64 pf=2 store=512")
    assert c.short().endswith("on simulated:2x4")


STATS = """Operator 0 ReadArrow->SplitBlocks(2): 1 tasks executed, 2 blocks produced in 0.25s
* Remote wall time: 637.36us min, 3.59ms max, 1.1ms mean, 220.38ms total
* Remote cpu time: 537.03us min, 1.6ms max, 983.38us mean, 196.68ms total
* Output num rows per block: 4 min, 4 max, 4 mean, 800 total

Operator 1 MapBatches(load_batch): 100 tasks executed, 100 blocks produced in 6.17s
* Remote wall time: 81.94ms min, 98.57ms max, 83.95ms mean, 8.39s total
* Remote cpu time: 1.95ms min, 4.54ms max, 2.76ms mean, 276.05ms total
* Output num rows per block: 8 min, 8 max, 8 mean, 800 total
"""


def test_ray_stats_text_is_read_as_numbers():
    s = parse_stats(STATS)
    op = s["operators"]["MapBatches(load_batch)"]
    assert op["tasks"] == 100 and op["wall_s"] == 6.17 and op["rows"] == 800
    assert op["task_wall_s"] == pytest.approx(8.39) and op["task_cpu_s"] == pytest.approx(0.27605)
    assert s["operators"]["ReadArrow->SplitBlocks(2)"]["task_wall_s"] == pytest.approx(0.22038)
