"""The aten ops a block of torch code dispatches: on a GPU each non-view op is a kernel
launch, so their count is what a launch-bound piece of code costs the host, and it can be
counted on any device (``benchmarks/share_launches.py``, the gpu engine's tests)."""

from __future__ import annotations

import collections

from torch.utils._python_dispatch import TorchDispatchMode


class DispatchedOps(TorchDispatchMode):
    """``with DispatchedOps() as dispatched: ...``; then ``dispatched.ops``: calls per aten
    op (its overload packet's name, e.g. ``aten.index_select``), views included."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))
