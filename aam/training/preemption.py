"""Turn SLURM's pre-walltime / preemption signals (SIGTERM, SIGUSR1) into a polled flag."""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class PreemptionFlag:
    """Context manager: while active, SIGTERM/SIGUSR1 only set ``requested`` and ``signal_name``.

    The trainer polls ``requested`` at step boundaries, saves ``latest.pt`` and exits. The
    previous handlers are restored on exit. Outside the main thread (where Python cannot install
    signal handlers) it does nothing and ``requested`` stays False.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    def __enter__(self) -> PreemptionFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            # None means the old handler was not installed from Python; fall back to the default.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        self._previous.clear()
