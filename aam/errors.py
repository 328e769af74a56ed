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


class DiskFullError(InputError):
    """A file could not be written for lack of space: the file system is full (ENOSPC), the
    user's quota is used up (EDQUOT) or the file is over the process's file size limit (EFBIG,
    ``ulimit -f``). Raised by ``aam.runtime.atomic.atomic_output`` with the temporary removed
    and the previous file under the name kept; the CLI prints it as one line and exits with
    ``EXIT_INPUT``, as for bad input: the run is fine, its location is not."""
