"""User-facing errors: one line naming the file, the field and the fix."""

# Exit statuses of `aam <command>` (aam/cli.py): one per failure class, so a workflow or a
# batch script can tell bad input from a run that diverged.
EXIT_INPUT = 2
EXIT_NON_FINITE = 3


class InputError(Exception):
    """Bad user input. The CLI prints the message as one line and exits with ``EXIT_INPUT``."""


class NonFiniteError(Exception):
    """A loss, gradient, count or metric is NaN or infinite. The CLI prints the message as one
    line and exits with ``EXIT_NON_FINITE``; no final output is written as a success."""
