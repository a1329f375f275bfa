"""The `dataperf` group: every command of dataperf.commands under one exit-code contract, and main()."""

from __future__ import annotations

import os
import sys

import click

from dataperf.commands import COMMANDS
from dataperf.errors import RankLost, error_line
from dataperf.workflows.clock import mark_started


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
        if isinstance(e, RankLost):  # a rank whose peer ended first: the peer's line says why
            sys.exit(e.exit_code)
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
