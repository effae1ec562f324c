"""`make run`: prepare the embedded database, then run the web server, a Celery worker and beat
together until Ctrl-C, and stop every one of them (and their children) on the way out."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from argparse import ArgumentParser
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

STOP_GRACE_SECONDS = 10.0


class _Stop(Exception):
    pass


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop()


def _group_alive(pgid: int) -> bool:
    """Whether any process other than a zombie is still in process group `pgid`."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            # The command name is in parentheses and may contain spaces: split after it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            return True
    return False


class Command(BaseCommand):
    help = (
        "Run Vouch locally with embedded defaults: migrate, install schedules, create the demo "
        "users, then serve the web app, a Celery worker, beat and (unless a real Stripe test key "
        "is configured) the Stripe sandbox until Ctrl-C."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--noreload",
            action="store_true",
            help="Do not restart the web server when a source file changes (the worker and beat "
            "never restart): for tests that must not lose requests to an edit nearby.",
        )

    def handle(
        self, *args: Any, host: str, port: int, noreload: bool = False, **options: Any
    ) -> None:
        self.stdout.write("==> Preparing the database")
        call_command("migrate", interactive=False, verbosity=1)
        call_command("setup_periodic_tasks")
        self.stdout.write("==> Demo users")
        call_command("seed_demo")

        python = sys.executable
        commands: dict[str, list[str]] = {}
        if getattr(settings, "STRIPE_USES_SANDBOX", False):
            sandbox = urlsplit(settings.STRIPE_API_BASE)
            commands["sandbox"] = [
                python, "-m", "stripe_sandbox",
                "--host", sandbox.hostname or "127.0.0.1", "--port", str(sandbox.port or 12111),
                # The sandbox delivers its events, signed, to the app's webhook endpoint.
                "--webhook-url", f"http://{host}:{port}/webhooks/stripe",
                "--webhook-secret", settings.STRIPE_WEBHOOK_SECRETS[0],
            ]  # fmt: skip
        commands |= {
            # The ASGI app (config/asgi.py): Django and the MCP server at /mcp. The reloader
            # watches the apps' Python files only (never var/ or .venv/).
            "web": [
                python, "-m", "uvicorn", "config.asgi:application",
                "--host", host, "--port", str(port), "--no-access-log",
                *([] if noreload else ["--reload", *self._reload_dirs()]),
            ],
            "worker": [
                python, "-m", "celery", "-A", "config.celery_app", "worker",
                "--loglevel=INFO", "--concurrency=2",
                "--without-mingle", "--without-gossip", "--without-heartbeat",
            ],
            "beat": [python, "-m", "celery", "-A", "config.celery_app", "beat", "--loglevel=INFO"],
        }  # fmt: skip
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"]}
        env |= self._metrics_env()
        env |= self._receipt_key_env()
        children: dict[str, subprocess.Popen[bytes]] = {}
        previous = {
            sig: signal.signal(sig, _raise_stop)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }
        exit_code = 0
        try:
            for name, command in commands.items():
                # Each child leads its own process group, so stopping it reaches its children
                # too (uvicorn's reloader, the worker's pool).
                children[name] = subprocess.Popen(  # noqa: S603 - our own fixed commands
                    command, cwd=settings.BASE_DIR, env=env, start_new_session=True
                )
                self.stdout.write(f"started {name} (pid {children[name].pid})")
            stripe_line = (
                f"Stripe sandbox: {settings.STRIPE_API_BASE}"
                if "sandbox" in children
                else f"Stripe: {settings.STRIPE_API_BASE} (a real test-mode key)"
            )
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nVouch is running at http://{host}:{port}/  "
                    f"(admin: /admin/, API docs: /api/v1/docs/). {stripe_line}. "
                    "Press Ctrl-C to stop.\n"
                )
            )
            self.stdout.flush()
            while True:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(
                            f"{name} exited with status {child.returncode}; stopping the rest."
                        )
                        exit_code = 1
                        raise _Stop()
                time.sleep(0.5)
        except _Stop:
            pass
        finally:
            # A second Ctrl-C must not interrupt the cleanup.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            self._stop_all(children)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if exit_code:
            sys.exit(exit_code)

    def _reload_dirs(self) -> list[str]:
        """`--reload-dir` for each folder of Python source (an app, config/): the
        web server restarts when one changes, as runserver did."""
        base = Path(settings.BASE_DIR)
        dirs = [
            p.name for p in sorted(base.iterdir()) if p.is_dir() and ((p / "__init__.py").exists())
        ]
        return [arg for name in dirs if name != "tests" for arg in ("--reload-dir", name)]

    def _metrics_env(self) -> dict[str, str]:
        """Prometheus counters in multiprocess mode (ops/collectors.py): the web server and the
        worker each write their own files in one folder, emptied at each start, and /metrics
        sums them. A folder set in the environment is used as it is."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return {}
        folder = Path(settings.VAR_DIR) / "prometheus"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return {"PROMETHEUS_MULTIPROC_DIR": str(folder)}

    def _receipt_key_env(self) -> dict[str, str]:
        """A sandbox receipt key for this local installation (SPEC §8): created under the var
        directory the first time, then reused, and passed to every process, trusted as `sandbox`.
        A signing key set in the environment is left as it is."""
        if os.environ.get("RECEIPT_SIGNING_KEY"):
            return {}
        from receipts.keys import key_generate

        path = Path(settings.VAR_DIR) / "receipt-signing-key.json"
        if not path.exists():
            key = key_generate("sandbox")
            path.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                json.dump(key, f, indent=2)
            self.stdout.write(f"==> Created a sandbox receipt signing key: {path}")
        key = json.loads(path.read_text())
        trusted = {
            **dict(getattr(settings, "RECEIPT_TRUSTED_KEYS", {}) or {}),
            key["key_id"]: {"public_key": key["public_key"], "environment": "sandbox"},
        }
        return {
            "RECEIPT_SIGNING_KEY": key["seed"],
            "RECEIPT_SIGNING_KEY_ID": key["key_id"],
            "RECEIPT_SIGNING_ENVIRONMENT": "sandbox",
            "RECEIPT_TRUSTED_KEYS": json.dumps(trusted),
            "VOUCH_ENVIRONMENT": "sandbox",
        }

    def _stop_all(self, children: dict[str, "subprocess.Popen[bytes]"]) -> None:
        self.stdout.write("\n==> Stopping")
        for child in children.values():
            # What a terminal's Ctrl-C does: SIGINT to the whole group, which each of these
            # programs (and the worker's pool) answers with a clean shutdown.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for name, child in children.items():
            while time.monotonic() < deadline and (child.poll() is None or _group_alive(child.pid)):
                time.sleep(0.1)
            if child.poll() is None or _group_alive(child.pid):
                self.stderr.write(f"{name} did not stop in time; killing it.")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            self.stdout.write(f"stopped {name}")
