"""The log lines the settings' handler writes, tapped for a test: `log_tap` (one JSON object per
line, as production and the test settings render them)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest


class LogTap:
    """What the configured root handler writes, as the lines it writes: the same formatter (the
    settings' LOGGING), into a buffer. pytest's capture cannot see the handler's stream, which
    it replaced before the handler was made."""

    def __init__(self) -> None:
        (configured,) = logging.getLogger().handlers[:1]
        self.buffer = io.StringIO()
        self.handler = logging.StreamHandler(self.buffer)
        self.handler.setFormatter(configured.formatter)

    def text(self) -> str:
        return self.buffer.getvalue()

    def records(self) -> list[dict[str, Any]]:
        """Every line, parsed: each must be one JSON object."""
        return [json.loads(line) for line in self.text().splitlines()]

    def clear(self) -> None:
        self.buffer.seek(0)
        self.buffer.truncate()


@pytest.fixture
def log_tap() -> Iterator[LogTap]:
    tap = LogTap()
    root = logging.getLogger()
    root.addHandler(tap.handler)
    try:
        yield tap
    finally:
        root.removeHandler(tap.handler)
