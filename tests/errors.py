"""Assertion helper shared by the input-validation tests."""

import re

import pytest

from aam.errors import InputError


def one_line_error(func, *args, **kwargs) -> str:
    """The message of the InputError ``func(*args, **kwargs)`` raises; it must be one line."""
    with pytest.raises(InputError) as info:
        func(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# a frame of the stacks faulthandler writes at a crash (a traceback's reads "line N, in")
FAULT_FRAME = re.compile(r'File ".*", line \d+ in ')


def failure_lines(stderr: str, tail: int = 2000) -> str:
    """What a failed subprocess said: every line naming an error (one per rank of a torchrun,
    wherever it falls in the log) and, after a native crash, the stacks faulthandler wrote;
    then the log's last ``tail`` characters."""
    errors = [
        line for line in stderr.splitlines() if "error" in line.lower() or FAULT_FRAME.search(line)
    ]
    return "\n".join([*errors, "--- last lines:", stderr[-tail:] if tail else ""])
