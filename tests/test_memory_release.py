"""release_free_memory: glibc's malloc_trim when the C library has it, a no-op elsewhere."""

from __future__ import annotations

import ctypes
import platform

import pytest

from aam.training.meters import memory


@pytest.fixture(autouse=True)
def fresh_lookup():
    memory._malloc_trim.cache_clear()
    yield
    memory._malloc_trim.cache_clear()


def test_runs_on_glibc():
    # The test machines and the cluster images run glibc, which has malloc_trim.
    assert platform.libc_ver()[0] == "glibc"
    assert memory.release_free_memory() is True
    assert memory.release_free_memory() is True  # repeatable


def test_skipped_without_a_c_library(monkeypatch):
    monkeypatch.setattr(memory.ctypes.util, "find_library", lambda name: None)
    assert memory.release_free_memory() is False


def test_skipped_when_libc_lacks_malloc_trim(monkeypatch):
    class NoTrim:  # a C library without the symbol (musl, macOS)
        def __init__(self, name):
            pass

        def __getattr__(self, name):
            raise AttributeError(name)

    monkeypatch.setattr(memory.ctypes.util, "find_library", lambda name: "libc.so.6")
    monkeypatch.setattr(ctypes, "CDLL", NoTrim)
    assert memory.release_free_memory() is False
