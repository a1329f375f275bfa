"""User-facing errors: one clear line and exit code 2, never a traceback for a user mistake; and the mapping
from any exception that ends a command (or fails a trial) to that line."""

from __future__ import annotations

import errno
import re

OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")


class UserError(Exception):
    """A problem with the user's input that names the problem and the fix."""

    exit_code = 2


class TrialError(Exception):
    """A single trial failed (worker crash, corrupt shard, impossible config); a sweep records it and goes on."""


class RankLost(Exception):
    """Under several ranks, a collective failed because another rank ended first (or never came): that rank says
    why, so this one ends quietly with exit_code, which the torchrun agent (measure.distributed.agent) knows."""

    exit_code = 3


def describe_failure(e: BaseException) -> str:
    """One line naming what went wrong inside the loader, without the traceback."""
    msg = str(e).strip().splitlines()
    tail = [ln for ln in msg if ln.strip()] or [type(e).__name__]
    last = tail[-1].split("TrialError: ", 1)[-1] if isinstance(e, TrialError) else tail[-1]
    text = f"{type(e).__name__}: {last}" if type(e).__name__ not in last else last
    if "DataLoader worker" in str(e) and "exited unexpectedly" in str(e):
        text = "a DataLoader worker died (killed, or out of memory); " + text
    if any(h in f"{type(e).__name__} {e}" for h in ("ReadError", "tarfile", "unexpected end")):
        return f"corrupt tar shard mid-epoch: {text}"
    return text


def error_line(e: BaseException) -> tuple[str, int]:
    """The one `error:` line and exit code for an exception that ends a command (see docs/commands.md, exit codes): a
    library's text that spans lines is joined with spaces, and object reprs (`<_io.BytesIO object at 0x..>`,
    which name nothing a user has) are left out."""
    msg, code = _error(e)
    return " ".join(OBJECT_REPR.sub("", msg).split()), code


def _error(e: BaseException) -> tuple[str, int]:
    import click

    if isinstance(e, UserError):
        return str(e), e.exit_code
    if isinstance(e, click.UsageError):
        msg = e.format_message().strip().rstrip(".")
        cmd = e.ctx.command_path if e.ctx is not None else "dataperf"
        return f"{msg}; see `{cmd} --help`", 2
    if isinstance(e, click.ClickException):
        return e.format_message(), e.exit_code
    if isinstance(e, TrialError):
        return str(e), 2
    if isinstance(e, OSError) and e.errno is not None:
        where = f" {e.filename}" if e.filename else ""
        fix = "free space" if e.errno == errno.ENOSPC else "check the path and its permissions"
        return f"cannot use{where}: {e.strerror}; {fix}", 2
    if isinstance(e, EOFError):  # a file that ends before its data does (a truncated pickle, an empty array)
        return (f"a file ended early (EOFError: {str(e) or 'no data left'}); check the data files (set "
                "DATAPERF_TRACEBACK=1 to see which was being read)"), 2
    text = describe_failure(e)
    if text.startswith(("corrupt", "a DataLoader worker died")):
        return f"{text}; check the data with `dataperf shards inspect --verify`", 2
    return (f"{text} (set DATAPERF_TRACEBACK=1 to see where; if your data and options look "
            "right, this is a dataperf bug: please report it)"), 2
