"""The example MCP session docs/mcp.md runs (`agents/example_session.py`), as a person starts it:
its callback listens on a free port unless told one (issue 41: a fixed 8765 stopped a second
session, or one started while anything else held that port), and a Vouch that is not there is
said in one line, naming the address it tried and `--server`. No database: these start the
script."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def port_8765_taken() -> Iterator[None]:
    """The port the script's callback used to insist on, held by someone else."""
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8765))
        holder.listen()
    except OSError:
        pass  # already held by something else: just as good
    try:
        yield
    finally:
        holder.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _example_session(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agents.example_session", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_callback_takes_a_free_port_and_an_absent_vouch_is_said(
    port_8765_taken: None,
) -> None:
    server = f"http://127.0.0.1:{_closed_port()}"
    done = _example_session("--server", server)
    assert "Cannot listen" not in done.stderr + done.stdout
    assert done.returncode == 1
    assert f"Cannot reach Vouch at {server}" in done.stderr
    assert "--server" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_asked_for_and_taken_is_refused_in_words(port_8765_taken: None) -> None:
    done = _example_session("--port", "8765", "--server", f"http://127.0.0.1:{_closed_port()}")
    assert done.returncode != 0
    assert "Cannot listen on 127.0.0.1:8765 for the callback" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_mcp_page_runs_the_script_with_the_flags_it_takes() -> None:
    """docs/mcp.md's example session names Vouch's address (`make run PORT=…` moves it) and no
    flag the script does not take."""
    page = (ROOT / "docs" / "mcp.md").read_text()
    commands = re.findall(r"python -m agents\.example_session[^`\n]*", page)
    assert commands, "docs/mcp.md no longer runs the example session"
    taken = set(re.findall(r"--[a-z][a-z-]*", _example_session("--help").stdout))
    for command in commands:
        assert "--server" in command, command
        assert set(re.findall(r"--[a-z][a-z-]*", command)) <= taken, command
    described = " ".join(page.split())
    for flag in taken - {"--help"}:
        assert f"`{flag}" in described, f"docs/mcp.md does not say what {flag} does"
