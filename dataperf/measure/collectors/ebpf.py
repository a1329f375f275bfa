"""Read syscalls (count, bytes, size histogram) per process via eBPF, for this process and its workers.

First choice is bcc (Debian: apt-get install python3-bpfcc); bcc compiles against kernel headers, so where
the running kernel ships none (many VMs) the same probes run through bpftrace (apt-get install bpftrace),
which needs only the kernel's BTF. Both need root (or CAP_BPF) and the syscalls tracepoints in tracefs.
When neither can run the collector says why in one line, and the /proc counters stand in.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dataperf.results import MIB

DEBIAN_DIST = "/usr/lib/python3/dist-packages"
TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

PROGRAM = r"""
#include <linux/sched.h>
struct key_t { u32 pid; char comm[TASK_COMM_LEN]; };
BPF_HASH(reads, struct key_t, u64);
BPF_HASH(nbytes, struct key_t, u64);
BPF_HASH(inflight, u64, u8);
BPF_HISTOGRAM(sizes, int, 64);

static inline int ours(void) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (tgid == ROOT_TGID) return 1;
    struct task_struct *t = (struct task_struct *)bpf_get_current_task();
    /* DataLoader workers are children; under torchrun (or a wrapper script) ranks and their workers sit
       up to four levels below the root */
    struct task_struct *p = t->real_parent;
    if (p->tgid == ROOT_TGID) return 1;
    p = p->real_parent;
    if (p->tgid == ROOT_TGID) return 1;
    p = p->real_parent;
    if (p->tgid == ROOT_TGID) return 1;
    p = p->real_parent;
    return p->tgid == ROOT_TGID;
}
static inline int enter(void) {
    if (!ours()) return 0;
    u64 id = bpf_get_current_pid_tgid();
    u8 one = 1;
    inflight.update(&id, &one);
    return 0;
}
static inline int leave(long ret) {
    u64 id = bpf_get_current_pid_tgid();
    if (!inflight.lookup(&id)) return 0;
    inflight.delete(&id);
    struct key_t k = {};
    k.pid = id >> 32;
    bpf_get_current_comm(&k.comm, sizeof(k.comm));
    reads.increment(k);
    if (ret > 0) {
        nbytes.increment(k, ret);
        sizes.increment(bpf_log2l(ret));
    }
    return 0;
}
TRACEPOINT_PROBE(syscalls, sys_enter_read) { return enter(); }
TRACEPOINT_PROBE(syscalls, sys_exit_read) { return leave(args->ret); }
TRACEPOINT_PROBE(syscalls, sys_enter_pread64) { return enter(); }
TRACEPOINT_PROBE(syscalls, sys_exit_pread64) { return leave(args->ret); }
"""


def import_bcc():
    """bcc from this environment, else Debian's python3-bpfcc (appended to the path, so ours wins)."""
    try:
        return importlib.import_module("bcc")
    except ImportError:
        pass
    if Path(DEBIAN_DIST, "bcc").is_dir():
        if DEBIAN_DIST not in sys.path:
            sys.path.append(DEBIAN_DIST)
        try:
            return importlib.import_module("bcc")
        except Exception:
            return None
    return None


OURS = ("(pid == ROOT_TGID || curtask->real_parent->tgid == ROOT_TGID"
        " || curtask->real_parent->real_parent->tgid == ROOT_TGID"
        " || curtask->real_parent->real_parent->real_parent->tgid == ROOT_TGID"
        " || curtask->real_parent->real_parent->real_parent->real_parent->tgid == ROOT_TGID)")
BPFTRACE = """
tracepoint:syscalls:sys_exit_read, tracepoint:syscalls:sys_exit_pread64
/OURS/ { @reads[pid, comm] = count(); }
tracepoint:syscalls:sys_exit_read, tracepoint:syscalls:sys_exit_pread64
/OURS && args->ret > 0/
{ @bytes[pid, comm] = sum(args->ret); @sizes = hist(args->ret); }
""".replace("OURS", OURS)

# our own helpers are children too; they are not the loader
NOT_LOADER = {"bpftrace", "iostat", "pidstat", "sadc"}


def precheck() -> str | None:
    """Why no eBPF backend can run here (checks common to both), or None."""
    if sys.platform != "linux":
        return "not Linux"
    if os.geteuid() != 0:
        return "needs root (or CAP_BPF + CAP_PERFMON); run as root or with sudo"
    if not any(Path(t, "events/syscalls/sys_enter_read").exists() for t in TRACEFS):
        return ("no syscalls tracepoints: tracefs not mounted (mount -t tracefs nodev /sys/kernel/tracing) "
                "or kernel built without CONFIG_FTRACE_SYSCALLS")
    return None


def _row(pid: int, comm: str, reads: int, nbytes: int) -> dict[str, Any]:
    return {"pid": pid, "comm": comm, "reads": reads, "read_mib": nbytes / MIB}


def _summary(backend: str, rows: list[dict[str, Any]], hist: dict[str, int]) -> dict[str, Any]:
    rows = sorted((r for r in rows if r["comm"] not in NOT_LOADER), key=lambda r: -r["reads"])
    return {"available": True, "backend": backend, "per_process": rows,
            "reads_total": sum(r["reads"] for r in rows), "read_mib_total": sum(r["read_mib"] for r in rows),
            "read_size_histogram_bytes": hist}


class _Bcc:
    name = "bcc"
    root_pid: int | None = None

    def start(self) -> None:
        bcc = import_bcc()
        if bcc is None:
            raise RuntimeError("bcc not installed (apt-get install python3-bpfcc)")
        text = PROGRAM.replace("ROOT_TGID", str(self.root_pid or os.getpid())).encode()
        with tempfile.TemporaryFile() as err:
            sys.stdout.flush()
            sys.stderr.flush()
            saved = [os.dup(1), os.dup(2)]
            for fd in (1, 2):  # bcc's compiler writes its complaints straight to fds 1 and 2
                os.dup2(err.fileno(), fd)
            try:
                self.bpf = bcc.BPF(text=text)
                failure = None
            except Exception as e:
                failure = e
            finally:
                for fd, s in zip((1, 2), saved, strict=True):
                    os.dup2(s, fd)
                    os.close(s)
            if failure is not None:
                err.seek(0)
                lines = [ln for ln in err.read().decode(errors="replace").splitlines() if ln.strip()]
                why = next((ln for ln in lines if "kernel headers" in ln), lines[0] if lines else str(failure))
                raise RuntimeError(f"bcc could not build its program: {why[:200]}")

    def stop(self) -> dict[str, Any]:
        nbytes = {(k.pid, k.comm): v.value for k, v in self.bpf["nbytes"].items()}
        rows = [_row(k.pid, k.comm.decode(errors="replace"), v.value, nbytes.get((k.pid, k.comm), 0))
                for k, v in self.bpf["reads"].items()]
        hist = {f"{2 ** (k.value - 1) if k.value else 0}-{2 ** k.value - 1}": v.value
                for k, v in sorted(self.bpf["sizes"].items(), key=lambda kv: kv[0].value) if v.value}
        self.bpf.cleanup()
        return _summary(self.name, rows, hist)


class _Bpftrace:
    """The same probes through bpftrace, which resolves kernel types from BTF instead of headers."""

    name = "bpftrace"
    attach_timeout_s = 20.0
    root_pid: int | None = None

    def start(self) -> None:
        exe = shutil.which("bpftrace")
        if exe is None:
            raise RuntimeError("bpftrace not installed (apt-get install bpftrace)")
        fd, out = tempfile.mkstemp(prefix="dataperf-bpftrace-", suffix=".json")
        os.close(fd)
        self.out = Path(out)
        prog = BPFTRACE.replace("ROOT_TGID", str(self.root_pid or os.getpid()))
        self.proc = subprocess.Popen([exe, "-f", "json", "-o", out, "-e", prog], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + self.attach_timeout_s
        while "attached_probes" not in self.out.read_text():
            if self.proc.poll() is not None:
                err = [ln for ln in self.proc.stderr.read().splitlines() if "RLIMIT_MEMLOCK" not in ln]
                raise RuntimeError(f"bpftrace failed: {' '.join(err)[:300] or 'exit ' + str(self.proc.returncode)}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("bpftrace did not attach its probes within 20 s")
            time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGINT)  # bpftrace prints its maps on SIGINT, then exits
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        reads: dict[str, int] = {}
        nbytes: dict[str, int] = {}
        hist: dict[str, int] = {}
        for line in self.out.read_text().splitlines():
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            data = msg.get("data", {})
            if msg.get("type") == "map":
                reads.update(data.get("@reads", {}))
                nbytes.update(data.get("@bytes", {}))
            elif msg.get("type") == "hist":
                hist = {f"{b.get('min', 0)}-{b.get('max', 0)}": b["count"] for b in data.get("@sizes", [])
                        if b.get("count")}
        self.out.unlink(missing_ok=True)
        rows = []
        for key, n in reads.items():
            pid, _, comm = key.partition(",")
            rows.append(_row(int(pid), comm, n, nbytes.get(key, 0)))
        return _summary(self.name, rows, hist)


class EbpfReadCollector:
    """bcc if it can build its program here, else bpftrace; else one line saying why neither could."""

    name = "ebpf"

    def __init__(self, backends: list | None = None, root_pid: int | None = None) -> None:
        """root_pid: whose process tree to count (default this process; `dataperf watch --pid` another)."""
        self.backends = backends if backends is not None else [_Bcc(), _Bpftrace()]
        for b in self.backends:
            b.root_pid = root_pid
        self.active = None
        self.why: str | None = None

    def start(self) -> None:
        self.why = precheck()
        if self.why:
            return
        reasons = []
        for b in self.backends:
            try:
                b.start()
            except RuntimeError as e:
                reasons.append(f"{b.name}: {e}")
                continue
            self.active = b
            if reasons:
                self.note = "; ".join(reasons)
            return
        self.why = "; ".join(reasons)

    def stop(self) -> dict[str, Any]:
        if self.active is None:
            return {"available": False, "why": self.why or "not started",
                    "fallback": "per-process read_syscalls from /proc/PID/io (processes collector)"}
        out = self.active.stop()
        if getattr(self, "note", None):
            out["skipped"] = self.note
        return out
