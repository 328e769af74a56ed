"""Returning freed heap memory to the operating system between epochs.

glibc keeps memory that PyTorch frees (CPU activations, gradients) in its heap for reuse, so a
process's resident set stays at its high-water mark and grows when a later epoch's batches do
not fit the holes left by earlier ones. ``malloc_trim(0)`` hands the free pages back (also from
the middle of the heap); the trainer calls it after each epoch's training steps and after
validation. Elsewhere (musl, macOS, Windows) there is no such call and this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None when the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the heap's free pages to the OS (glibc ``malloc_trim(0)``); True if it ran, False
    where the C library has no ``malloc_trim`` (nothing to do). Costs milliseconds."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
