"""Turn SLURM's pre-walltime / preemption signals (SIGTERM, SIGUSR1) and Ctrl-C (SIGINT) into a
polled flag."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
_REASONS: dict[int, str] = {}  # signal -> why this process sent it to itself (signal_self)


def signal_self(reason: str, sig: signal.Signals = signal.SIGTERM) -> None:
    """Send ``sig`` to this process, saying why: a PreemptionFlag names ``reason`` beside the
    signal (outside one, SIGTERM ends the process as usual)."""
    _REASONS[int(sig)] = reason
    os.kill(os.getpid(), sig)


class PreemptionFlag:
    """Context manager: while active, SIGTERM/SIGUSR1/SIGINT only set ``requested`` and
    ``signal_name`` (a second Ctrl-C too: it would otherwise lose the steps since the last save,
    and Snakemake passes a second one to its jobs as well).

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
        reason = _REASONS.pop(signum, None)
        name = signal.Signals(signum).name
        self.signal_name = f"{name} ({reason})" if reason else name

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
