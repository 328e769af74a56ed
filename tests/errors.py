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
