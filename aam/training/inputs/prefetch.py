"""Batches made ahead of the training step in one background thread.

A thread, not DataLoader worker processes: batch making is numpy/scipy work plus the UniFrac
kernel, which numba runs without the GIL (serially in this thread, no threading layer), so it
overlaps torch's step in the same process; the study (table, tree index) is shared, not
copied or pickled into workers; and nothing forks a process that already runs torch and
OpenMP threads. Each batch is a function of its arguments only, so making it ahead of time
changes no result.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")

AHEAD = 2  # batches being made while the step runs


class Prefetch(Generic[Item]):
    """``make(*args)`` for each of ``calls`` in order, ``ahead`` of the consumer; use as a
    context manager (leaving it, e.g. on preemption, cancels what was not started and waits for
    the batch in progress). An exception in ``make`` is raised where its item is taken."""

    def __init__(
        self, make: Callable[..., Item], calls: Sequence[tuple[Any, ...]], ahead: int = AHEAD
    ) -> None:
        self.make, self.calls, self.ahead = make, calls, ahead
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aam-batches")

    def __enter__(self) -> Iterator[Item]:
        return self._items()

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _items(self) -> Iterator[Item]:
        pending: deque[Future[Item]] = deque()
        calls = iter(self.calls)
        for args in calls:
            pending.append(self.pool.submit(self.make, *args))
            if len(pending) > self.ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
