"""Vouch's version, as `pyproject.toml` names it: one place, read once (what the MCP server's
`serverInfo` says, and anything else that reports the release)."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@functools.cache
def vouch_version() -> str:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return str(project["version"])
