"""Benchmark: reading an envelope through MCP (`envelope_get`) against the REST API under `make
run`'s setup (issue 39 item 11's second setup): `manage.py run_local` with the local settings
(SQLite, DEBUG, uvicorn, its worker, beat and the sandbox), in a folder of its own.

1. Starts `run_local` with VOUCH_VAR_DIR in a fresh temporary folder (the developer's var/ is never
   touched), on `--port` (BENCH_WEB_PORT, default 8123) and the sandbox on `--sandbox-port`
   (BENCH_SANDBOX_PORT, default 12112), the per-token and per-person limits lifted (as
   mcp_vs_rest.py lifts them: what is measured is a read, not a refusal).
2. Funds an envelope of the demo buyer and issues an API token and an OAuth access token bound to
   the run's /mcp (in this process, on the run's SQLite database).
3. One client, one request at a time: `--warmup` calls then `--calls` calls of each surface,
   twice in turn (REST, MCP, REST, MCP). Prints the client's p50 per surface and, from the
   server's own log lines (`request_finished` and `mcp_request`: `duration_ms`), the server's
   p50 per surface and the ratio MCP / REST (issue 39's target: at most 1.25).

Run from the repo root: .venv/bin/python bench/make_run_reads.py [--calls 200] [--warmup 10]
    [--port 8123] [--sandbox-port 12112]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = "2026-07-28"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DURATION = re.compile(r"duration_ms=([\d.]+)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per surface per turn")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls before each turn")
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("BENCH_WEB_PORT", "8123")),
        help="run_local's web port (env BENCH_WEB_PORT; default 8123)",
    )
    parser.add_argument(
        "--sandbox-port",
        type=int,
        default=int(os.environ.get("BENCH_SANDBOX_PORT", "12112")),
        help="the sandbox's port (env BENCH_SANDBOX_PORT; default 12112)",
    )
    return parser


def _environment(var_dir: str, args: argparse.Namespace) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "VOUCH_VAR_DIR": var_dir,
        "STRIPE_API_BASE": f"http://127.0.0.1:{args.sandbox_port}",
        "VOUCH_THROTTLE_TOKEN": "10000000/min",
        "VOUCH_THROTTLE_USER": "10000000/min",
        "MCP_TOOL_CALL_RATE": "",
    }


def _wait_until_up(base: str, process: subprocess.Popen[bytes], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"run_local exited ({process.returncode}): see its log")
        try:
            if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise SystemExit(f"run_local did not answer at {base} within {seconds:.0f} s")


def _seed(base: str) -> dict[str, str]:
    """The demo buyer's funded envelope and two tokens, written in this process (run_local's
    SQLite database: the environment above names it)."""
    import django

    django.setup()
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application, set_token_value

    from accounts.models import User
    from accounts.services import api_token_issue
    from envelopes.services.funding import envelope_create

    buyer = User.objects.get(username="buyer")
    funded = envelope_create(owner=buyer, amount_micro=20_000_000, payment_method="pm_card_visa")
    _, api = api_token_issue(user=buyer)
    application = Application.objects.create(
        name="bench make_run_reads",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
        algorithm="",
    )
    raw = secrets.token_urlsafe(30)
    token = AccessToken(
        user=buyer,
        application=application,
        scope="escrow:read",
        expires=timezone.now() + timedelta(hours=1),
        resource=[f"{base}/mcp"],
    )
    set_token_value(token, raw)
    token.save()
    return {"envelope": funded.envelope.public_id, "api": api, "oauth": raw}


def _timed(call: Any, calls: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _server_durations(log: Path, offset: int) -> tuple[list[float], list[float]]:
    """duration_ms of the REST envelope reads and the MCP envelope_get calls the server logged."""
    rest: list[float] = []
    mcp: list[float] = []
    lines = log.read_text(errors="replace").splitlines()[offset:]
    for line in map(_ANSI.sub, itertools.repeat(""), lines):
        found = _DURATION.search(line)
        if found is None:
            continue
        if "request_finished" in line and "escrow/envelopes/" in line:
            rest.append(float(found.group(1)))
        elif "mcp_request" in line and "envelope_get" in line:
            mcp.append(float(found.group(1)))
    return rest, mcp


def main() -> int:
    args = build_parser().parse_args()
    base = f"http://127.0.0.1:{args.port}"
    var_dir = tempfile.mkdtemp(prefix="vouch-make-run-bench-")
    os.environ.update(_environment(var_dir, args))
    sys.path.insert(0, str(ROOT))
    log = Path(var_dir) / "run_local.log"
    print(f"  .. run_local on {base} (SQLite in {var_dir}), its log in {log}", flush=True)
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - this interpreter and manage.py
            [sys.executable, "manage.py", "run_local", "--port", str(args.port), "--noreload"],
            cwd=ROOT,
            env=os.environ.copy(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_up(base, process)
        seeded = _seed(base)
        print(f"  .. the demo buyer's envelope {seeded['envelope']} and two tokens", flush=True)
        session = requests.Session()
        ids = itertools.count(1)

        def rest() -> None:
            answer = session.get(
                f"{base}/api/v1/escrow/envelopes/{seeded['envelope']}",
                headers={"Authorization": f"Bearer {seeded['api']}"},
            )
            if answer.status_code != 200:
                raise SystemExit(f"REST answered {answer.status_code}: {answer.text[:300]}")

        def mcp() -> None:
            params = {
                "name": "envelope_get",
                "arguments": {"envelope_id": seeded["envelope"]},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            }
            body = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": params}
            answer = session.post(
                f"{base}/mcp",
                data=json.dumps(body),
                headers={
                    "Authorization": f"Bearer {seeded['oauth']}",
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                    "MCP-Protocol-Version": PROTOCOL,
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": "envelope_get",
                },
            )
            if answer.status_code != 200 or answer.json().get("result", {}).get("isError", True):
                raise SystemExit(f"MCP answered {answer.status_code}: {answer.text[:300]}")

        offset = len(log.read_text(errors="replace").splitlines())
        client: dict[str, list[float]] = {"REST GET envelope": [], "MCP envelope_get": []}
        for _ in range(2):
            client["REST GET envelope"] += _timed(rest, args.calls, args.warmup)
            client["MCP envelope_get"] += _timed(mcp, args.calls, args.warmup)
        time.sleep(1)  # the last lines reach the log
        rest_ms, mcp_ms = _server_durations(log, offset)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    width = 52
    for name, times in client.items():
        print(
            f"{name + ', client p50 / p95:':<{width}}"
            f"{statistics.median(times):.2f} / {statistics.quantiles(times, n=20)[18]:.2f} ms"
        )
    if not rest_ms or not mcp_ms:
        print("the server's log lines were not found: see", log)
        return 1
    rest_p50, mcp_p50 = statistics.median(rest_ms), statistics.median(mcp_ms)
    print(f"{'REST GET envelope, server log p50:':<{width}}{rest_p50:.2f} ms (n {len(rest_ms)})")
    print(f"{'MCP envelope_get, server log p50:':<{width}}{mcp_p50:.2f} ms (n {len(mcp_ms)})")
    print(
        f"{'ratio MCP / REST (server log p50):':<{width}}{mcp_p50 / rest_p50:.2f} (target <= 1.25)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
