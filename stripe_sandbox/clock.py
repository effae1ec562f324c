"""The sandbox's clock: wall time plus an offset that tests move forward (`/_sandbox/clock`)."""

from __future__ import annotations

import threading
import time


class Clock:
    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.time() + self._offset

    def now_int(self) -> int:
        """Stripe writes `created` in whole seconds."""
        return int(self.now())

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._offset += seconds
            return self._offset

    def reset(self) -> None:
        with self._lock:
            self._offset = 0.0

    def set_offset(self, seconds: float) -> None:
        """The offset a saved sandbox had (its state file): restarted, the clock stands as far
        ahead of wall time as it stood, as if it had run on meanwhile."""
        with self._lock:
            self._offset = float(seconds)

    @property
    def offset(self) -> float:
        return self._offset
