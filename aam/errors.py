"""User-facing errors: one line naming the file, the field and the fix."""


class InputError(Exception):
    """Bad user input. The CLI prints the message as one line and exits with status 2."""
