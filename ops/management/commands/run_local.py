"""`make run`: prepare the embedded database, then run the web server, a Celery worker and beat
together until Ctrl-C, and stop every one of them (and their children) on the way out.
`make reset` (`run_local --reset`): forget what `make run` kept, the database and the Stripe
sandbox's state together."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from argparse import ArgumentParser
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from ops.local_ports import Listener, ports_problems, wait_listening
from receipts.keys import key_generate

STOP_GRACE_SECONDS = 10.0
# How long the servers may take to listen before "Vouch is running" is said anyway.
LISTEN_TIMEOUT_SECONDS = 120.0
DEFAULT_SANDBOX_API_BASE = "http://127.0.0.1:12111"
# What `make run` uses, for the manage.py commands beside it (config/settings/local.py reads it).
LOCAL_SETTINGS_FILE = "local-settings.json"
# The Stripe sandbox's state, beside the database whose records name its objects: a restart of
# `make run` finds the charges, refunds and disputes it left (stripe_sandbox/persistence.py).
SANDBOX_STATE_FILE = "stripe-sandbox.state"


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
            "--sandbox-port",
            type=int,
            help="The Stripe sandbox's port (`make run SANDBOX_PORT=…`); by default the port of "
            "STRIPE_API_BASE, or 12111.",
        )
        parser.add_argument(
            "--noreload",
            action="store_true",
            help="Do not restart the web server when a source file changes (the worker and beat "
            "never restart): for tests that must not lose requests to an edit nearby.",
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Start nothing: delete the SQLite database, the Stripe sandbox's state and the "
            "queued tasks, together (`make reset`; stop `make run` first).",
        )

    def handle(
        self,
        *args: Any,
        host: str,
        port: int,
        sandbox_port: int | None = None,
        noreload: bool = False,
        reset: bool = False,
        **options: Any,
    ) -> None:
        var_dir = Path(settings.VAR_DIR)
        if reset:
            for path in local_state_reset(var_dir, settings.DATABASES["default"]):
                self.stdout.write(f"removed {path}")
            self.stdout.write("make run's state is reset: the next `make run` starts afresh.")
            return
        uses_sandbox = bool(getattr(settings, "STRIPE_USES_SANDBOX", False))
        stripe_api_base = _stripe_api_base(uses_sandbox=uses_sandbox, sandbox_port=sandbox_port)
        listeners = [Listener("web", host, port)]
        if uses_sandbox:
            sandbox = urlsplit(stripe_api_base)
            listeners.append(
                Listener("sandbox", sandbox.hostname or "127.0.0.1", sandbox.port or 0)
            )
        # Before anything starts: a taken port is one line saying how to move it.
        if problems := ports_problems(listeners):
            for line in problems:
                self.stderr.write(line)
            sys.exit(1)
        self._warn_unpaired(var_dir)
        self.stdout.write("==> Preparing the database")
        call_command("migrate", interactive=False, verbosity=1)
        call_command("setup_periodic_tasks")
        self.stdout.write("==> Demo users")
        call_command("seed_demo", domain=f"{host}:{port}")

        python = sys.executable
        commands: dict[str, list[str]] = {}
        if uses_sandbox:
            commands["sandbox"] = sandbox_command(
                python,
                stripe_api_base=stripe_api_base,
                webhook_url=f"http://{host}:{port}/webhooks/stripe",
                webhook_secret=settings.STRIPE_WEBHOOK_SECRETS[0],
                var_dir=var_dir,
                rate_limits=settings.STRIPE_RATE_LIMITS != "off",
            )
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
        # The sandbox's address and the receipt key, for every process started here, and
        # written to var/local-settings.json for the manage.py commands typed beside it.
        env |= local_settings_prepare(
            Path(settings.VAR_DIR),
            stripe_api_base=stripe_api_base if uses_sandbox else None,
            environ=os.environ,
            say=self.stdout.write,
        )
        children: dict[str, subprocess.Popen[bytes]] = {}
        previous = {
            sig: signal.signal(sig, _raise_stop)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        }
        exit_code = 0
        started = False
        try:
            for name, command in commands.items():
                # Each child leads its own process group, so stopping it reaches its children
                # too (uvicorn's reloader, the worker's pool).
                children[name] = subprocess.Popen(  # noqa: S603 - our own fixed commands
                    command, cwd=settings.BASE_DIR, env=env, start_new_session=True
                )
                self.stdout.write(f"started {name} (pid {children[name].pid})")
            failed = wait_listening(listeners, children, timeout=LISTEN_TIMEOUT_SECONDS)
            if failed is not None:
                self.stderr.write(
                    f"{failed} stopped as it started (exit status {children[failed].returncode}; "
                    "its own message is above): Vouch is not running. Stopping the rest."
                )
                exit_code = 1
                raise _Stop()
            started = True
            stripe_line = (
                f"Stripe sandbox: {stripe_api_base}"
                if "sandbox" in children
                else f"Stripe: {stripe_api_base} (a real test-mode key)"
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
            # Processes still starting up answer Ctrl-C's signal with a traceback from
            # wherever their imports were: they are told to terminate instead.
            self._stop_all(children, signal.SIGINT if started else signal.SIGTERM)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if exit_code:
            sys.exit(exit_code)

    def _warn_unpaired(self, var_dir: Path) -> None:
        """A database left by a `make run` whose sandbox kept no state names Stripe objects this
        sandbox never held: say so, and how to start afresh."""
        database = _sqlite_path(settings.DATABASES["default"])
        uses_sandbox = bool(getattr(settings, "STRIPE_USES_SANDBOX", False))
        state = var_dir / SANDBOX_STATE_FILE
        if uses_sandbox and database is not None and database.exists() and not state.exists():
            self.stderr.write(
                f"warning: {database} was kept, but the Stripe sandbox's state was not ({state} "
                "is missing): its payments and refunds name objects the sandbox does not hold. "
                "`make reset` starts both afresh."
            )

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
        return receipt_key_env(Path(settings.VAR_DIR), environ=os.environ, say=self.stdout.write)

    def _stop_all(
        self, children: dict[str, "subprocess.Popen[bytes]"], signum: int = signal.SIGINT
    ) -> None:
        self.stdout.write("\n==> Stopping")
        for child in children.values():
            # What a terminal's Ctrl-C does: SIGINT to the whole group, which each of these
            # programs (and the worker's pool) answers with a clean shutdown.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signum)
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


def _stripe_api_base(*, uses_sandbox: bool, sandbox_port: int | None) -> str:
    """The address Vouch calls Stripe at: the sandbox's from the environment (or the default),
    at `sandbox_port` when one is given (`make run SANDBOX_PORT=…`), never from the file the
    previous start wrote (which local settings read for the other commands); Stripe's own when a
    real test-mode key is used."""
    if not uses_sandbox:
        return str(os.environ.get("STRIPE_API_BASE") or settings.STRIPE_API_BASE)
    base = urlsplit(
        str(
            os.environ.get("STRIPE_API_BASE")
            or getattr(settings, "SANDBOX_API_BASE", DEFAULT_SANDBOX_API_BASE)
        )
    )
    if sandbox_port is None:
        return base.geturl()
    host = base.hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return base._replace(netloc=f"{host}:{sandbox_port}").geturl()


def sandbox_command(
    python: str,
    *,
    stripe_api_base: str,
    webhook_url: str,
    webhook_secret: str,
    var_dir: Path,
    rate_limits: bool = True,
) -> list[str]:
    """The Stripe sandbox as `make run` starts it: at the address the app calls, delivering its
    events, signed, to the app's webhook endpoint, its state kept beside the database, enforcing
    Stripe's rate limits as Vouch's budgets expect them (`STRIPE_RATE_LIMITS=off` lifts both)."""
    sandbox = urlsplit(stripe_api_base)
    return [
        python, "-m", "stripe_sandbox",
        "--host", sandbox.hostname or "127.0.0.1", "--port", str(sandbox.port or 12111),
        "--webhook-url", webhook_url, "--webhook-secret", webhook_secret,
        "--state-file", str(var_dir / SANDBOX_STATE_FILE),
        "--rate-limits", "stripe" if rate_limits else "off",
    ]  # fmt: skip


def _sqlite_path(database: Mapping[str, Any]) -> Path | None:
    """The file of an SQLite database (None for another engine or an in-memory one)."""
    if database.get("ENGINE") != "django.db.backends.sqlite3":
        return None
    name = str(database.get("NAME") or "")
    return None if not name or name == ":memory:" or name.startswith("file:") else Path(name)


def local_state_reset(var_dir: Path, database: Mapping[str, Any]) -> list[Path]:
    """Forget what `make run` kept, together: its SQLite database (with its write-ahead log), the
    Stripe sandbox's state (whose objects the database names) and the queued Celery tasks (which
    name the database's rows). The receipt key, the cache and uploaded files stay. Refuses
    (CommandError) a database that is not `make run`'s own SQLite file. Answers what it removed."""
    path = _sqlite_path(database)
    if path is None:
        raise CommandError(
            f"The database is not make run's SQLite file (ENGINE {database.get('ENGINE')}, from "
            "DATABASE_URL): reset it yourself, then delete "
            f"{var_dir / SANDBOX_STATE_FILE}."
        )
    removed = []
    for target in (
        path,
        path.with_name(path.name + "-wal"),
        path.with_name(path.name + "-shm"),
        var_dir / SANDBOX_STATE_FILE,
    ):
        if target.exists():
            target.unlink()
            removed.append(target)
    queue = var_dir / "celery"
    if queue.exists():
        shutil.rmtree(queue)
        removed.append(queue)
    return removed


def receipt_key_env(
    var_dir: Path, *, environ: Mapping[str, str], say: Callable[[str], Any] = lambda _: None
) -> dict[str, str]:
    """A sandbox receipt key for this local installation (SPEC §8): created under the var
    directory the first time, then reused, and passed to every process, trusted as `sandbox`.
    A signing key set in the environment is left as it is."""
    if environ.get("RECEIPT_SIGNING_KEY"):
        return {}
    path = var_dir / "receipt-signing-key.json"
    if not path.exists():
        key = key_generate("sandbox")
        path.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            json.dump(key, f, indent=2)
        say(f"==> Created a sandbox receipt signing key: {path}")
    key = json.loads(path.read_text())
    trusted = {
        **_trusted_in(environ),
        key["key_id"]: {"public_key": key["public_key"], "environment": "sandbox"},
    }
    return {
        "RECEIPT_SIGNING_KEY": key["seed"],
        "RECEIPT_SIGNING_KEY_ID": key["key_id"],
        "RECEIPT_SIGNING_ENVIRONMENT": "sandbox",
        "RECEIPT_TRUSTED_KEYS": json.dumps(trusted),
        "VOUCH_ENVIRONMENT": "sandbox",
    }


def _trusted_in(environ: Mapping[str, str]) -> dict[str, Any]:
    """The receipt keys the environment trusts (`RECEIPT_TRUSTED_KEYS`, JSON)."""
    return dict(json.loads(environ.get("RECEIPT_TRUSTED_KEYS") or "{}"))


def local_settings_prepare(
    var_dir: Path,
    *,
    stripe_api_base: str | None,
    environ: Mapping[str, str],
    say: Callable[[str], Any] = lambda _: None,
) -> dict[str, str]:
    """What `make run` prepares under `var_dir` before it starts its processes, and the
    environment they get: the sandbox's address (`stripe_api_base`; None when a real test-mode
    key is used) and the receipt key (created once, trusted). Both are written, at every start,
    to `var_dir/local-settings.json` (readable by its owner only: it holds the key's seed), which
    local settings read, so a `manage.py` command run with this var directory uses what
    `make run` uses (a variable set in its environment still wins)."""
    receipt = receipt_key_env(var_dir, environ=environ, say=say)
    env = dict(receipt)
    written: dict[str, Any] = {
        "written_by": "make run (ops/management/commands/run_local.py), at each start",
        "read_by": "config/settings/local.py: environment variables win over each setting",
    }
    if stripe_api_base is not None:
        env["STRIPE_API_BASE"] = written["STRIPE_API_BASE"] = stripe_api_base
    if receipt:
        for name in (
            "RECEIPT_SIGNING_KEY",
            "RECEIPT_SIGNING_KEY_ID",
            "RECEIPT_SIGNING_ENVIRONMENT",
            "VOUCH_ENVIRONMENT",
        ):
            written[name] = receipt[name]
        written["RECEIPT_TRUSTED_KEYS"] = json.loads(receipt["RECEIPT_TRUSTED_KEYS"])
    else:
        written["RECEIPT_TRUSTED_KEYS"] = _trusted_in(environ)
    var_dir.mkdir(parents=True, exist_ok=True)
    path = var_dir / LOCAL_SETTINGS_FILE
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(written, f, indent=2)
    os.replace(partial, path)  # whole or not at all, for a command reading it meanwhile
    return env
