"""`make run` when a port it needs is taken (issue 41): one line naming the port and the setting
that moves it (`make run SANDBOX_PORT=…`, `make run PORT=…`), no traceback, a failing exit
status, and nothing started; and when a server it starts stops at once, never "Vouch is running"."""

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ops.local_ports import Listener, ports_problems
from tests.helpers import free_port
from tests.test_smoke_run import ROOT

RUN_TIMEOUT_S = 240


@contextmanager
def _held_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _make_run(var_dir: Path, *, port: int, sandbox_port: int) -> subprocess.CompletedProcess[str]:
    """`make run` as a person types it, with its state in `var_dir`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "STRIPE_API_KEY"}
    }
    env |= {
        "VOUCH_VAR_DIR": str(var_dir),
        "PYTHONUNBUFFERED": "1",
        # Where the sandbox listened before SANDBOX_PORT existed: a run of this test on the old
        # code meets the same taken port.
        "STRIPE_API_BASE": f"http://127.0.0.1:{sandbox_port}",
    }
    return subprocess.run(
        ["make", "run", f"PORT={port}", f"SANDBOX_PORT={sandbox_port}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        start_new_session=True,
    )


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def test_a_taken_sandbox_port_is_one_line_naming_sandbox_port(tmp_path: Path) -> None:
    with _held_port() as taken:
        done = _make_run(tmp_path / "var", port=free_port(), sandbox_port=taken)
    said = _said(done)
    assert done.returncode != 0, said
    lines = [line for line in said.splitlines() if "SANDBOX_PORT=" in line]
    assert len(lines) == 1, said
    assert f"port {taken}" in lines[0], lines[0]
    assert "Stripe sandbox" in lines[0], lines[0]
    assert "Traceback" not in said, said
    assert "Vouch is running" not in said, said
    # Checked before anything started: no database made, no process started.
    assert "started " not in said, said
    assert "Preparing the database" not in said, said
    assert not (tmp_path / "var" / "vouch.sqlite3").exists()


def test_a_taken_web_port_is_one_line_naming_port(tmp_path: Path) -> None:
    with _held_port() as taken:
        done = _make_run(tmp_path / "var", port=taken, sandbox_port=free_port())
    said = _said(done)
    assert done.returncode != 0, said
    lines = [line for line in said.splitlines() if "make run PORT=" in line]
    assert len(lines) == 1, said
    assert f"port {taken}" in lines[0], lines[0]
    assert "web server" in lines[0], lines[0]
    assert "Traceback" not in said, said
    assert "Vouch is running" not in said, said
    assert "started " not in said, said


def test_a_server_that_stops_at_once_is_said_without_vouch_is_running(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir()
    # A state file the sandbox refuses: it exits at once, after the ports were found free.
    (var / "stripe-sandbox.state").write_text("not a state file")
    done = _make_run(var, port=free_port(), sandbox_port=free_port())
    said = _said(done)
    assert done.returncode != 0, said
    assert "Vouch is running" not in said, said
    assert "Traceback" not in said, said
    assert "KeyboardInterrupt" not in said, said
    assert "sandbox stopped as it started" in said, said


def test_the_same_port_for_both_servers_is_refused() -> None:
    port = free_port()
    (line,) = ports_problems(
        [Listener("web", "127.0.0.1", port), Listener("sandbox", "127.0.0.1", port)]
    )
    assert f"port {port}" in line, line
    assert "SANDBOX_PORT=" in line, line


def test_the_makefile_passes_sandbox_port_and_help_names_it() -> None:
    dry = subprocess.run(
        ["make", "-n", "run", "SANDBOX_PORT=12345", "PORT=8123"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "run_local --port 8123 --sandbox-port 12345" in dry.stdout, dry.stdout
    help_text = subprocess.run(
        ["make", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    assert "make run SANDBOX_PORT=" in help_text, help_text
    assert "make run PORT=" in help_text, help_text
    assert "PORT=8001" not in help_text, "8001 is docs-serve's port"
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`make run SANDBOX_PORT=12112`" in readme
    assert "`make run PORT=8080`" in readme


def test_an_address_not_of_this_machine_is_one_line_too() -> None:
    (line,) = ports_problems([Listener("sandbox", "192.0.2.1", 12111)])  # TEST-NET-1
    assert "cannot listen on 192.0.2.1:12111" in line, line
