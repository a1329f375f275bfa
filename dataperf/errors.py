"""User-facing errors: one clear line and exit code 2, never a traceback for a user mistake."""


class UserError(Exception):
    """A problem with the user's input that names the problem and the fix."""

    exit_code = 2


class TrialError(Exception):
    """A single trial failed (worker crash, corrupt shard, impossible config); a sweep records it and goes on."""
