"""CI: schemathesis against a live Vouch, with two buyers and an ops identity.

Everything runs in a throw-away PostgreSQL database (`vouch_ci_schemathesis_<pid>`, on the server
named by DATABASE_URL), migrated, and dropped at the end whatever happens. The Stripe sandbox and
gunicorn (`config.settings.test`, DEBUG off, 2 sync workers) run on free ports, each in its own
session, stopped at the end (the helpers of `bench/refund_api.py`).

Setup: two buyers (`buyer_a`, `buyer_b`) and one ops user (staff, in the `ops` group with every
Vouch permission). Each buyer logs in (a session), funds an envelope through the API and refunds
part of it, so that every read has an object of its own to find. Schemathesis then sees three WFC
identities (`.ci/schemathesis.toml`): `buyer_a` by session (cookie + X-CSRFToken: buyers move money
only with a session), `buyer_b` by bearer token, `ops` by session. `buyer_a` and `buyer_b` are
*peers*: the `object_level_authorization` check replays what one read of its own as the other,
and fails if the other gets it. An operation one identity is refused (401/403) moves on to the next
(so the disputes API runs as `ops`).

`schemathesis run --checks all` runs every phase (examples, coverage, fuzzing, stateful), bounded
by `--max-examples` per operation and `--max-time` overall. Exit status: schemathesis's (non-zero
on any failure), or 1 if the set-up failed. Its JUnit report and the server's log land in
`--report-dir` (default `var/schemathesis/`).

Run from the repo root: .venv/bin/python .ci/schemathesis.py [--max-examples 20] [--max-time 200]
    [--seed 1] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from signal import SIGTERM
from types import FrameType
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.refund_api import (  # noqa: E402  (the repo root must be on sys.path first)
    DEFAULT_DATABASE_URL,
    SETTINGS,
    Database,
    Server,
    bench_database_urls,
    django_setup,
    free_port,
    progress,
    server_env,
)

CONFIG = REPO / ".ci" / "schemathesis.toml"
ME = "/api/v1/me"
ENVELOPES = "/api/v1/escrow/envelopes"
SCHEMA = "/api/v1/schema/?format=json"
FUND_MICRO = 100_000_000  # $100.00
REFUND_MICRO = 1_000_000  # $1.00
TIMEOUT_S = 30.0
# Generous limits for the run: the fuzzer must reach the views, not the throttles (their 429 is
# documented on every operation, and the throttles have tests of their own).
SERVER_ENV = {
    "VOUCH_THROTTLE_USER": "100000/min",
    "VOUCH_THROTTLE_TOKEN": "100000/min",
    "VOUCH_THROTTLE_MONEY": "100000/min",
    # The shared cache holds the throttles' counters by user id: a prefix of this run's own, so
    # another run's users (the same ids, in another throw-away database) never count here.
    "CACHE_KEY_PREFIX": f"ci-schemathesis-{os.getpid()}",
}


class Identity:
    """A user of the run: its session (cookie and CSRF token) or its bearer token."""

    def __init__(self, name: str, session_id: str) -> None:
        self.name = name
        self.session_id = session_id
        self.csrf = ""
        self.token = ""

    def login(self, base: str) -> None:
        """Learn the CSRF token: GET /me sets the cookie."""
        response = requests.get(
            base + ME, cookies={"sessionid": self.session_id}, timeout=TIMEOUT_S
        )
        self.csrf = response.cookies.get("csrftoken") or ""
        if response.status_code != 200 or not self.csrf:
            raise RuntimeError(f"GET {ME} answered {response.status_code}: {response.text[:300]}")

    def session_headers(self) -> dict[str, str]:
        return {
            "Cookie": f"sessionid={self.session_id}; csrftoken={self.csrf}",
            "X-CSRFToken": self.csrf,
        }

    def post(self, base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(
            base + path, json=body, headers=self.session_headers(), timeout=TIMEOUT_S
        )
        if response.status_code not in (200, 201):
            raise RuntimeError(
                f"{self.name}: POST {path} answered {response.status_code}: {response.text[:300]}"
            )
        data: dict[str, Any] = response.json()["data"]
        return data

    def wfc_entry(self, *, bearer: bool) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if bearer else self.session_headers()
        return {
            "name": self.name,
            "fixedHeaders": [{"name": k, "value": v} for k, v in headers.items()],
        }


def identities_create() -> dict[str, Identity]:
    """buyer_a, buyer_b and ops, each logged in (a session); buyer_b also gets a bearer token."""
    from django.test import Client

    from accounts.models import User
    from accounts.services import api_token_issue, demo_users_ensure

    demo_users_ensure(
        users={
            name: {"email": f"{name}@example.com", "staff": name == "ops", "password": None}
            for name in ("buyer_a", "buyer_b", "ops")
        }
    )
    identities = {}
    for name in ("buyer_a", "buyer_b", "ops"):
        client = Client()
        client.force_login(User.objects.get(username=name))
        identities[name] = Identity(name, client.cookies["sessionid"].value)
    _, identities["buyer_b"].token = api_token_issue(
        user=User.objects.get(username="buyer_b"), name="schemathesis"
    )
    return identities


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=20, help="test cases per operation")
    parser.add_argument("--max-time", type=int, default=200, help="time budget of the run (s)")
    parser.add_argument("--seed", type=int, default=1, help="schemathesis's seed (reproducible)")
    # One worker: with two, hypothesis parses lambdas' source in both threads at once and CPython
    # 3.11's parser is not safe for that ("SystemError: AST constructor recursion depth mismatch",
    # a crash of the tool seen in CI, not a finding about Vouch).
    parser.add_argument("--workers", type=int, default=1, help="schemathesis's workers")
    parser.add_argument(
        "--report-dir", type=Path, default=REPO / "var" / "schemathesis", help="reports and logs"
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to `schemathesis run`

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally blocks

    signal.signal(SIGTERM, terminated)
    name = f"vouch_ci_schemathesis_{os.getpid()}"
    db_url, maintenance = bench_database_urls(
        os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), name
    )
    os.environ["DATABASE_URL"] = db_url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ.pop("VOUCH_CRASH_AT", None)
    args.report_dir.mkdir(parents=True, exist_ok=True)
    database = Database(maintenance, name)
    servers: list[Server] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ci-schemathesis-") as tmp:
        try:
            database.create()
            django_setup()
            identities = identities_create()
            sandbox_port, app_port = free_port(), free_port()
            sandbox_url = f"http://127.0.0.1:{sandbox_port}"
            base = f"http://127.0.0.1:{app_port}"
            env = {**server_env(db_url + "?conn_max_age=60", sandbox_url), **SERVER_ENV}
            sandbox = Server(
                "stripe_sandbox",
                [sys.executable, "-m", "stripe_sandbox", "--host", "127.0.0.1",
                 "--port", str(sandbox_port)],
                env,
                Path(tmp) / "sandbox.log",
            )  # fmt: skip
            servers.append(sandbox)
            gunicorn = Server(
                "gunicorn",
                [sys.executable, "-m", "gunicorn", "config.wsgi:application",
                 "--bind", f"127.0.0.1:{app_port}", "--workers", "2",
                 "--graceful-timeout", "5", "--timeout", "60", "--log-level", "warning"],
                env,
                args.report_dir / "gunicorn.log",
            )  # fmt: skip
            servers.append(gunicorn)
            sandbox.wait_until(lambda: requests.get(f"{sandbox_url}/_sandbox/state", timeout=2).ok)
            gunicorn.wait_until(lambda: requests.get(base + ME, timeout=2).status_code == 401)

            for identity in identities.values():
                identity.login(base)
            for buyer in ("buyer_a", "buyer_b"):
                identity = identities[buyer]
                envelope = identity.post(
                    base,
                    ENVELOPES,
                    {"amount_micro": FUND_MICRO, "payment_method": "pm_card_visa"},
                )
                identity.post(
                    base,
                    f"{ENVELOPES}/{envelope['envelope_id']}/refund",
                    {"amount_micro": REFUND_MICRO},
                )
            progress("buyer_a and buyer_b each funded an envelope and refunded part of it")

            auth = Path(tmp) / "wfc-auth.json"
            auth.write_text(
                json.dumps(
                    {
                        "auth": [
                            identities["buyer_a"].wfc_entry(bearer=False),
                            identities["buyer_b"].wfc_entry(bearer=True),
                            identities["ops"].wfc_entry(bearer=False),
                        ]
                    }
                )
            )
            command = [
                str(Path(sys.executable).with_name("schemathesis")),
                "--config-file", str(CONFIG),
                "run", base + SCHEMA,
                "--checks", "all",
                "--max-examples", str(args.max_examples),
                "--max-time", str(args.max_time),
                "--seed", str(args.seed),
                "--workers", str(args.workers),
                "--report", "junit",
                "--report-dir", str(args.report_dir),
                "--no-color",
                *extra,
            ]  # fmt: skip
            progress("schemathesis " + " ".join(command[1:]))
            # S603: our own argv (the venv's schemathesis).
            status = subprocess.call(  # noqa: S603
                command, cwd=REPO, env={**os.environ, "SCHEMATHESIS_WFC_AUTH": str(auth)}
            )
        finally:
            for server in reversed(servers):
                server.stop()
            database.drop()
            for log in Path(tmp).glob("*.log"):
                shutil.copy(log, args.report_dir / log.name)
    for line in slowest_requests(args.report_dir / "gunicorn.log"):
        print(line)
    print(f"schemathesis exit status {status}, {time.monotonic() - started:.0f} s in all")
    return status


def slowest_requests(log: Path, count: int = 5) -> list[str]:
    """The `count` slowest requests the server timed (its request log's `duration_ms`), to tell a
    slow Vouch from a stalled machine when the client's response-time check fails."""
    timed: list[tuple[float, str]] = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("duration_ms"), int | float):
            timed.append((float(entry["duration_ms"]), str(entry.get("request", ""))))
    timed.sort(reverse=True)
    return [f"  .. server took {ms:,.0f} ms: {request[:120]}" for ms, request in timed[:count]] + [
        f"  .. {len(timed)} requests timed by the server"
    ]


if __name__ == "__main__":
    sys.exit(main())
