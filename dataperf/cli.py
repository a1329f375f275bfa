"""The `dataperf` group: every command of dataperf.commands under one exit-code contract, and main()."""

from __future__ import annotations

import errno
import os
import re
import sys

import click

from dataperf.commands import COMMANDS
from dataperf.commands.sweep import mark_started
from dataperf.errors import UserError

OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")


def error_line(e: BaseException) -> tuple[str, int]:
    """The one `error:` line and exit code for an exception that ends a command (see docs/commands.md, exit codes): a
    library's text that spans lines is joined with spaces, and object reprs (`<_io.BytesIO object at 0x..>`,
    which name nothing a user has) are left out."""
    msg, code = _error(e)
    return " ".join(OBJECT_REPR.sub("", msg).split()), code


def _error(e: BaseException) -> tuple[str, int]:
    from dataperf.errors import TrialError

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
    from dataperf.measure.trial import describe_failure

    text = describe_failure(e)
    if text.startswith(("corrupt", "a DataLoader worker died")):
        return f"{text}; check the data with `dataperf shards inspect --verify`", 2
    return (f"{text} (set DATAPERF_TRACEBACK=1 to see where; if your data and options look "
            "right, this is a dataperf bug: please report it)"), 2


class ContractGroup(click.Group):
    """Every command ends the same way: 0 ok, 1 a regression or an unmet target, 2 with exactly one
    `error:` line for any user mistake (click's own usage errors included), 130 on Ctrl-C."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except (KeyboardInterrupt, click.Abort) as e:
            if not isinstance(e.__cause__, EOFError):
                click.echo("interrupted", err=True)
                sys.exit(130)
            self.fail(e.__cause__)  # click wraps every EOFError in Abort: a file that ended early, not Ctrl-C
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.ctx.get_help())  # a bare group asks for its help: that is not a mistake
            sys.exit(0)
        except Exception as e:
            self.fail(e)
        sys.exit(rv if isinstance(rv, int) else 0)

    @staticmethod
    def fail(e: BaseException) -> None:
        """Exit with the one `error:` line for e (or its traceback under DATAPERF_TRACEBACK=1)."""
        if os.environ.get("DATAPERF_TRACEBACK"):
            raise e
        msg, code = error_line(e)
        click.echo(f"error: {msg}", err=True)
        sys.exit(code)


@click.group(cls=ContractGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dataperf")
def cli() -> None:
    """Which data-loader configuration can your storage and CPUs sustain, and is training input-bound?"""


for command in COMMANDS:
    cli.add_command(command)


def main() -> None:
    """The console script and `python -m dataperf`: the budget of a sweep counts from this process's start."""
    mark_started()  # only the command's own process: a caller that imports cli keeps its clock
    cli(prog_name="dataperf")
