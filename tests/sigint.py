"""Ctrl-C tests start dataperf with SIGINT at its default disposition. A shell that runs the suite in the
background (`cmd &`, `setsid nohup`, some CI wrappers) hands every child SIGINT ignored, and Python then installs
no KeyboardInterrupt handler: the signal would do nothing, and the test would check how the suite was launched,
not dataperf (2026-12-04: every Ctrl-C test read exit 0 in a backgrounded loaded run)."""

import signal


def default_sigint() -> None:
    """Popen's preexec_fn: SIGINT back to SIG_DFL in the child before it execs Python."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
