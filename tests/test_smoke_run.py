"""Starts Vouch the way `make run` does (embedded defaults, a free port), reads two pages, stops
it with Ctrl-C's signal, and checks that nothing it started is left running. `make_run` starts it
for the other tests of `make run` too."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import stripe

from ops.management.commands.run_local import SANDBOX_STATE_FILE, sandbox_command
from stripe_sandbox import SandboxServer
from stripe_sandbox.client import SandboxControl
from tests.helpers import free_port, paid_charge

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120.0


@dataclass
class MakeRun:
    """A running `manage.py run_local`: its URLs, its environment (to run other commands against
    the same state) and every process's output so far."""

    pid: int
    base: str
    sandbox_url: str
    env: dict[str, str]
    output: list[str] = field(default_factory=list)

    @property
    def sandbox(self) -> SandboxControl:
        return SandboxControl(self.sandbox_url)

    def log(self) -> str:
        return "".join(self.output)


@contextmanager
def make_run(
    var_dir: Path, *, noreload: bool = False, extra_env: dict[str, str] | None = None
) -> Iterator[MakeRun]:
    """`manage.py run_local` as `make run` starts it (local settings, embedded defaults), its
    state in `var_dir`, the web server and the sandbox on free ports, every process's output
    captured (and left in `make-run.log` beside `var_dir`). Yields once the login page answers;
    stops it as Ctrl-C does and requires a clean exit. `noreload`: the web server does not restart
    (dropping the requests in flight) when someone edits a source file meanwhile."""
    port, sandbox_port = free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "STRIPE_API_KEY"}
    }
    env.update(
        STRIPE_API_BASE=f"http://127.0.0.1:{sandbox_port}",
        DJANGO_SETTINGS_MODULE="config.settings.local",
        VOUCH_VAR_DIR=str(var_dir),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra_env or {})
    command = [sys.executable, "manage.py", "run_local", "--port", str(port)]
    launcher = subprocess.Popen(
        [*command, "--noreload"] if noreload else command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    run = MakeRun(
        pid=launcher.pid,
        base=f"http://127.0.0.1:{port}",
        sandbox_url=f"http://127.0.0.1:{sandbox_port}",
        env=env,
    )
    reader = threading.Thread(target=lambda: run.output.extend(launcher.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert launcher.poll() is None, "run_local exited early:\n" + run.log()
            try:
                if _get(f"{run.base}/accounts/login/") == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "no answer in time:\n" + run.log()
            time.sleep(0.5)
        yield run
    finally:
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            raise
        finally:
            reader.join(timeout=10)
            (var_dir.parent / "make-run.log").write_text(run.log())
    assert launcher.returncode == 0, run.log()


def _alive_in_group(pgid: int) -> list[int]:
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our http URL
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_make_run_serves_pages_and_stops_cleanly(tmp_path: Path) -> None:
    with make_run(tmp_path / "var") as run:
        base = run.base
        assert _get(f"{base}/api/v1/docs/") == 200
        assert _get(f"{base}/admin/login/") == 200
        assert _get(f"{base}/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css") == 200
        children = dict(re.findall(r"started (\w+) \(pid (\d+)\)", run.log()))
        assert set(children) == {"sandbox", "web", "worker", "beat"}
        sandbox = urllib.request.Request(  # noqa: S310 - the sandbox's http URL
            f"{run.sandbox_url}/v1/charges",
            headers={"Authorization": "Bearer sk_test_vouch_sandbox"},
        )
        with urllib.request.urlopen(sandbox, timeout=5) as response:  # noqa: S310 - our URL
            assert json.loads(response.read())["object"] == "list"
        charge_id = paid_charge(
            stripe.StripeClient(
                "sk_test_vouch_sandbox",
                base_addresses={"api": run.sandbox_url},
                max_network_retries=0,
            )
        )
        pids = [int(pid) for pid in children.values()]
        for pid in pids:
            assert _alive_in_group(pid), f"pid {pid} is not running"
        assert "username ops" in run.log()
        assert "username buyer" in run.log()
    leftovers = {pid: _alive_in_group(pid) for pid in [*pids, run.pid]}
    assert not any(leftovers.values()), f"processes left behind: {leftovers}"
    # The sandbox kept its state beside the database: the next `make run` finds the charge.
    with SandboxServer(port=0, state_file=tmp_path / "var" / SANDBOX_STATE_FILE) as kept:
        client = stripe.StripeClient(
            "sk_test_vouch_sandbox", base_addresses={"api": kept.url}, max_network_retries=0
        )
        assert client.v1.charges.retrieve(charge_id).amount == 10_000


def test_make_run_gives_the_sandbox_a_state_file_beside_the_database(tmp_path: Path) -> None:
    command = sandbox_command(
        sys.executable,
        stripe_api_base="http://127.0.0.1:12345",
        webhook_url="http://127.0.0.1:8000/webhooks/stripe",
        webhook_secret="whsec_x",
        var_dir=tmp_path,
    )
    assert command[command.index("--state-file") + 1] == str(tmp_path / "stripe-sandbox.state")
    assert command[command.index("--port") + 1] == "12345"


def test_make_reset_forgets_the_database_and_the_sandbox_state_together(tmp_path: Path) -> None:
    var = tmp_path / "var"
    (var / "celery" / "queue").mkdir(parents=True)
    (var / "celery" / "queue" / "task.msg").write_text("{}")
    kept = [var / "receipt-signing-key.json", var / "media" / "evidence.pdf"]
    gone = [var / name for name in ("vouch.sqlite3", "vouch.sqlite3-wal", SANDBOX_STATE_FILE)]
    for path in [*kept, *gone]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "STRIPE_API_KEY"}}
    env |= {"DJANGO_SETTINGS_MODULE": "config.settings.local", "VOUCH_VAR_DIR": str(var)}
    done = subprocess.run(
        [sys.executable, "manage.py", "run_local", "--reset"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [path for path in gone if path.exists()] == []
    assert not (var / "celery" / "queue" / "task.msg").exists()
    assert all(path.exists() for path in kept)
    assert "make run's state is reset" in done.stdout
    # What `make reset` runs.
    dry = subprocess.run(
        ["make", "-n", "reset"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert "manage.py run_local --reset" in dry.stdout
