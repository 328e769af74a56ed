"""Assertion helper shared by the input-validation tests."""

import pytest

from aam.errors import InputError


def one_line_error(func, *args, **kwargs) -> str:
    """The message of the InputError ``func(*args, **kwargs)`` raises; it must be one line."""
    with pytest.raises(InputError) as info:
        func(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def failure_lines(stderr: str, tail: int = 2000) -> str:
    """What a failed subprocess said: every line naming an error (one per rank of a torchrun,
    wherever it falls in the log), then the log's last ``tail`` characters."""
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    return "\n".join([*errors, "--- last lines:", stderr[-tail:]])
