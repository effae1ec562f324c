"""Starts Vouch the way `make run` does (embedded defaults, a free port), reads two pages, stops
it with Ctrl-C's signal, and checks that nothing it started is left running."""

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
from pathlib import Path

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[1]


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
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "STRIPE_API_KEY"}
    }
    sandbox_port = free_port()
    env.update(
        STRIPE_API_BASE=f"http://127.0.0.1:{sandbox_port}",
        DJANGO_SETTINGS_MODULE="config.settings.local",
        VOUCH_VAR_DIR=str(tmp_path / "var"),
        PYTHONUNBUFFERED="1",
    )
    launcher = subprocess.Popen(
        [sys.executable, "manage.py", "run_local", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(launcher.stdout or []), daemon=True)
    reader.start()
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert launcher.poll() is None, "run_local exited early:\n" + "".join(output)
            try:
                if _get(f"{base}/accounts/login/") == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "no answer in 120 s:\n" + "".join(output)
            time.sleep(0.5)
        assert _get(f"{base}/api/v1/docs/") == 200
        assert _get(f"{base}/admin/login/") == 200
        assert _get(f"{base}/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css") == 200
        children = dict(re.findall(r"started (\w+) \(pid (\d+)\)", "".join(output)))
        assert set(children) == {"sandbox", "web", "worker", "beat"}
        sandbox = urllib.request.Request(
            f"http://127.0.0.1:{sandbox_port}/v1/charges",
            headers={"Authorization": "Bearer sk_test_vouch_sandbox"},
        )
        with urllib.request.urlopen(sandbox, timeout=5) as response:  # noqa: S310 - our URL
            assert json.loads(response.read())["object"] == "list"
        pids = [int(pid) for pid in children.values()]
        for pid in pids:
            assert _alive_in_group(pid), f"pid {pid} is not running"
        assert "username ops" in "".join(output)
        assert "username buyer" in "".join(output)
    finally:
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            raise
    assert launcher.returncode == 0, "".join(output)
    leftovers = {pid: _alive_in_group(pid) for pid in [*pids, launcher.pid]}
    assert not any(leftovers.values()), f"processes left behind: {leftovers}"
