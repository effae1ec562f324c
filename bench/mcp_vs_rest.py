"""Benchmark: reading an envelope through MCP (`envelope_get`) against the REST API (GET
/api/v1/escrow/envelopes/{id}), one server serving both.

Everything runs in a throw-away PostgreSQL database (`vouch_bench_mcp_<pid>`, created on the
server named by DATABASE_URL, default postgres://postgres@127.0.0.1:5432, through its `postgres`
database), migrated, and dropped at the end, also on error, Ctrl-C or SIGTERM. The Stripe sandbox
(`python -m stripe_sandbox`) and `gunicorn config.asgi:application -k
uvicorn_worker.UvicornWorker` (2 workers by default: production's server, Django and /mcp in one
ASGI app) run as subprocesses on free ports, each in its own session, stopped at the end.

1. Setup (untimed): N buyers (one per client), each with an envelope funded through the services
   at the sandbox ($20.00, a $5.00 top-up, a $3.00 refund: two funding legs and a refund with
   its legs), a personal API token (for REST) and an OAuth access token for the /mcp resource with
   scope escrow:read (for MCP), as Vouch's authorization server stores them. Each client checks
   once that both surfaces answer the same envelope, byte for byte once parsed.
2. N clients (threads, each a keep-alive `requests.Session`) call, for `--seconds` per surface in
   `--rounds` alternating rounds (MCP, REST, REST, MCP, …, so that other load on the machine
   weighs on both alike):
   - MCP: POST /mcp, one JSON-RPC `tools/call` of `envelope_get` with the bearer OAuth token,
     stateless, JSON response, as the MCP SDK's client sends it (protocol 2026-07-28 by default,
     the version it negotiates with this server; `--protocol 2025-06-18` for the handshake-era
     path). Ok: 200, not isError, the envelope's id in structuredContent.
   - REST: GET /api/v1/escrow/envelopes/{id} with the personal API token. Ok: 200 and the id.
3. Prints each surface's ok answers per second, latencies, the CPU used (gunicorn's workers,
   PostgreSQL, this load generator), and the ratio MCP / REST. Target: MCP >= 0.5 x REST.

Database connections as production has them: psycopg's pool (CONN_MAX_AGE 0, the pool in the
settings), through a settings module written to the temporary folder (config.settings.test plus
the pool); `--no-pool`: a new connection per request. The per-token MCP tool-call limit is off
(MCP_TOOL_CALL_RATE empty), as the REST throttles are in the test settings.

Run from the repo root: .venv/bin/python bench/mcp_vs_rest.py [--seconds 20] [--clients 8]
    [--rounds 2] [--workers 2] [--protocol 2026-07-28] [--no-pool] [--database-name NAME]
    [--redis-url URL] [--sandbox-port P] [--web-port P] (the last four also from
    BENCH_DATABASE_NAME, BENCH_REDIS_URL, BENCH_SANDBOX_PORT, BENCH_WEB_PORT)
Exit status 1 if a check fails or the target is missed; the summary is printed either way.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import secrets
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from signal import SIGTERM
from types import FrameType
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
# Run as `python bench/mcp_vs_rest.py`, sys.path[0] is bench/, where bench/verification.py would
# shadow the project's `verification` package: put the repo root there instead.
if sys.path and Path(sys.path[0]).resolve() == REPO / "bench":
    sys.path[0] = str(REPO)
elif str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.refund_api import (  # noqa: E402 - after the path fix above
    CpuMeter,
    Database,
    Phase,
    Sample,
    Server,
    add_database_flag,
    add_port_flag,
    add_redis_flag,
    bench_database_urls,
    django_setup,
    in_parallel,
    port_or_free,
    postmaster_pid,
    progress,
    run_phase,
    server_env,
    server_timing,
    signals_held,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/vouch"
SETTINGS = "config.settings.test"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/9"  # isolated; purged at the end
STRIPE_KEY = "sk_test_bench"
RATIO_TARGET = 0.5
REQUEST_TIMEOUT_S = 30.0
ENVELOPES = "/api/v1/escrow/envelopes"
PROTOCOLS = ("2026-07-28", "2025-06-18")
POOL_SETTINGS = '''"""bench/mcp_vs_rest.py: the test settings, with production's pool."""
from config.settings.test import *  # noqa: F403

DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {  # noqa: F405
    "min_size": 1,
    "max_size": 10,
    "timeout": 10.0,
}
'''


# --- the data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Buyer:
    envelope_id: str
    rest_token: str
    mcp_token: str


def buyers_seed(count: int, resource: str) -> list[Buyer]:
    """`count` buyers, each with a funded, topped-up, partly refunded envelope and two tokens."""
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    from accounts.models import User
    from accounts.services import api_token_issue, email_address_verify
    from envelopes import services

    application = Application.objects.create(
        name="bench assistant",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
        algorithm="",
    )
    buyers = []
    for number in range(count):
        user = User.objects.create_user(username=f"bench_buyer_{number}", password=None)
        email_address_verify(user=user, email=f"bench_buyer_{number}@example.test")
        funded = services.envelope_create(
            owner=user, amount_micro=20_000_000, payment_method="pm_card_visa"
        )
        envelope = funded.envelope
        services.envelope_top_up(
            envelope=envelope, amount_micro=5_000_000, payment_method="pm_card_visa"
        )
        services.envelope_refund(envelope_id=envelope.public_id, actor=user, amount_micro=3_000_000)
        _, rest_token = api_token_issue(user=user, name="bench")
        mcp_token = secrets.token_urlsafe(30)
        AccessToken.objects.create(
            user=user,
            application=application,
            token=mcp_token,
            scope="escrow:read",
            expires=timezone.now() + timedelta(hours=1),
            resource=[resource],
        )
        buyers.append(Buyer(envelope.public_id, rest_token, mcp_token))
    return buyers


# --- the clients --------------------------------------------------------------------------------


@dataclass
class Client:
    """One buyer's keep-alive session, calling either surface for its own envelope."""

    base: str
    buyer: Buyer
    protocol: str
    http: requests.Session = field(default_factory=requests.Session)
    ids: itertools.count[int] = field(default_factory=itertools.count)

    def rest_answer(self) -> requests.Response:
        return self.http.get(
            f"{self.base}{ENVELOPES}/{self.buyer.envelope_id}",
            headers={"Authorization": f"Bearer {self.buyer.rest_token}"},
            timeout=REQUEST_TIMEOUT_S,
        )

    def mcp_answer(self) -> requests.Response:
        body, headers = mcp_request(self)
        return self.http.post(
            f"{self.base}/mcp", data=body, headers=headers, timeout=REQUEST_TIMEOUT_S
        )

    def rest(self) -> Sample:
        return self._timed(self.rest_answer, lambda body: body["data"])

    def mcp(self) -> Sample:
        def envelope(body: Any) -> Any:
            result = body["result"]
            return None if result.get("isError") else result["structuredContent"]

        return self._timed(self.mcp_answer, envelope)

    def _timed(self, send: Any, envelope_of: Any) -> Sample:
        started = time.perf_counter()
        try:
            response = send()
        except requests.RequestException:
            ended = time.perf_counter()
            return Sample(ended - started, 0, None, None, False, ended)
        ended = time.perf_counter()
        good = response.status_code == 200
        if good:
            try:
                good = envelope_of(response.json())["envelope_id"] == self.buyer.envelope_id
            except (ValueError, KeyError, TypeError):
                good = False
        app, provider = server_timing(response.headers.get("Server-Timing", ""))
        return Sample(ended - started, response.status_code, app, provider, good, ended)

    def same_answer(self) -> bool:
        """Both surfaces show this envelope identically (the MCP result is the REST data)."""
        rest = self.rest_answer().json()["data"]
        mcp = self.mcp_answer().json()["result"]["structuredContent"]
        return bool(rest == mcp)


def mcp_request(client: Client) -> tuple[bytes, dict[str, str]]:
    """One JSON-RPC `tools/call` of `envelope_get` as the SDK's client sends it: body, headers."""
    params: dict[str, Any] = {
        "name": "envelope_get",
        "arguments": {"envelope_id": client.buyer.envelope_id},
    }
    headers = {
        "Authorization": f"Bearer {client.buyer.mcp_token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": client.protocol,
    }
    if client.protocol == PROTOCOLS[0]:  # as the SDK's client sends it at 2026-07-28
        headers.update({"Mcp-Method": "tools/call", "Mcp-Name": "envelope_get"})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": client.protocol,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    body = {"jsonrpc": "2.0", "id": next(client.ids), "method": "tools/call", "params": params}
    return json.dumps(body).encode(), headers


def profile_split(
    base: str, buyer: Buyer, protocol: str, calls: int, *, pool: bool
) -> list[tuple[str, str]]:
    """--profile: both surfaces called in this process (bench/mcp_profile.py), with the server's
    pool unless --no-pool: CPU ms per answer and where it goes."""
    from django.db import connections

    from bench.mcp_profile import profile_surfaces, scope

    if pool:  # as POOL_SETTINGS gives the server; new threads' connections read these settings
        connections.close_all()
        connections.settings["default"]["CONN_MAX_AGE"] = 0
        connections.settings["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1, "max_size": 10, "timeout": 10.0,
        }  # fmt: skip
    import config.asgi

    client = Client(base, buyer, protocol)
    mcp_body, mcp_headers = mcp_request(client)
    host = {"Host": base.removeprefix("http://")}  # the MCP token's resource names it
    rest_headers = {"Authorization": f"Bearer {buyer.rest_token}", **host}
    surfaces = {
        "MCP envelope_get": (scope("POST", "/mcp", {**mcp_headers, **host}), mcp_body),
        "REST GET envelope": (scope("GET", f"{ENVELOPES}/{buyer.envelope_id}", rest_headers), b""),
    }
    return profile_surfaces(
        surfaces, config.asgi.mcp_application.running, config.asgi.application, calls
    )


# --- the whole bench ----------------------------------------------------------------------------


def phase_lines(phase: Phase) -> list[tuple[str, str]]:
    cores = phase.cores
    per_ok = (lambda n: cores[n] * phase.wall / phase.good * 1000) if phase.good else None
    cpu = ", ".join(
        f"{name} {cores[name]:.2f}" + (f" ({per_ok(name):.2f} ms/ok)" if per_ok else "")
        for name in ("gunicorn", "postgres", "load generator", "other")
    )
    return [
        (
            f"{phase.name} ({phase.clients} clients, {phase.window:g} s):",
            f"{phase.rate:.1f} req/s ({phase.in_window} ok within the windows; {phase.good} of "
            f"{len(phase.samples)} answers ok in all)",
        ),
        (
            "  latency p50 / p99:",
            f"{phase.latency_ms(50):.1f} / {phase.latency_ms(99):.1f} ms",
        ),
        ("  non-2xx / no answer:", f"{phase.non_2xx} / {phase.no_answer}"),
        ("  CPU, cores:", cpu + f"; busy {cores['busy']:.2f} of {cores['machine']:.1f}"),
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per surface, in all (s)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers under gunicorn")
    parser.add_argument("--protocol", choices=PROTOCOLS, default=PROTOCOLS[0])
    parser.add_argument(
        "--no-pool", action="store_true", help="a database connection per request, no pool"
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=120.0,
        help="seconds the sandbox and gunicorn each have to answer (default 120)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also call each surface N times in this process, bare then profiled: the split",
    )
    add_database_flag(parser, "vouch_bench_mcp_<pid>")
    add_redis_flag(parser, DEFAULT_BROKER_URL)
    add_port_flag(parser, "--sandbox-port", "the stripe_sandbox's port")
    add_port_flag(parser, "--web-port", "gunicorn's port")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 600 or not 1 <= args.clients <= 64:
        parser.error("--seconds must be in (0, 600] and --clients in [1, 64]")
    if not 1 <= args.rounds <= 10 or args.seconds / args.rounds < 1:
        parser.error("--rounds must be in [1, 10], each round at least 1 s")
    if not 1 <= args.workers <= 16:
        parser.error("--workers must be in [1, 16]")
    if not 1 <= args.start_timeout <= 3600:
        parser.error("--start-timeout must be in [1, 3600] seconds")

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally blocks

    signal.signal(SIGTERM, terminated)

    name = args.database_name or f"vouch_bench_mcp_{os.getpid()}"
    bench_url, maintenance = bench_database_urls(
        os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), name
    )
    sandbox_port, app_port = port_or_free(args.sandbox_port), port_or_free(args.web_port)
    sandbox_url = f"http://127.0.0.1:{sandbox_port}"
    base = f"http://127.0.0.1:{app_port}"
    os.environ.update(
        DATABASE_URL=bench_url,
        DJANGO_SETTINGS_MODULE=SETTINGS,
        STRIPE_API_BASE=sandbox_url,
        STRIPE_API_KEY=STRIPE_KEY,
        CELERY_BROKER_URL=args.redis_url,
        MCP_TOOL_CALL_RATE="",  # the server's (below) and --profile's, in this process
    )
    os.environ.pop("VOUCH_CRASH_AT", None)
    logging.getLogger("stripe").setLevel(logging.WARNING)
    started = time.perf_counter()
    database = Database(maintenance, name)
    servers: list[Server] = []
    mcp, rest = Phase("MCP envelope_get", args.clients), Phase("REST GET envelope", args.clients)
    same = False
    split: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        try:
            database.create()
            django_setup()
            env = server_env(bench_url, sandbox_url)
            env["MCP_TOOL_CALL_RATE"] = ""
            env["CELERY_BROKER_URL"] = args.redis_url
            if not args.no_pool:
                (Path(tmp) / "bench_mcp_settings.py").write_text(POOL_SETTINGS)
                env["PYTHONPATH"] = os.pathsep.join([tmp, str(REPO), env.get("PYTHONPATH", "")])
                env["DJANGO_SETTINGS_MODULE"] = "bench_mcp_settings"
            # Limits lifted: the timed reads call no Stripe endpoint, so Stripe's limits change
            # none of the figures; only the setup's funding of every buyer in a row would be
            # refused past 25 calls a second.
            sandbox = Server(
                "stripe_sandbox",
                [sys.executable, "-m", "stripe_sandbox", "--host", "127.0.0.1",
                 "--port", str(sandbox_port), "--rate-limits", "off"],
                env,
                Path(tmp) / "sandbox.log",
            )  # fmt: skip
            servers.append(sandbox)
            sandbox.wait_until(
                lambda: requests.get(f"{sandbox_url}/_sandbox/state", timeout=2).ok,
                args.start_timeout,
            )
            buyers = buyers_seed(args.clients, f"{base}/mcp")
            progress(f"{args.clients} buyers, envelopes (2 funding legs, a refund) and tokens")
            if args.profile:
                split = profile_split(
                    base, buyers[0], args.protocol, args.profile, pool=not args.no_pool
                )
            gunicorn = Server(
                "gunicorn",
                [
                    sys.executable, "-m", "gunicorn", "config.asgi:application",
                    "-k", "uvicorn_worker.UvicornWorker",
                    "--bind", f"127.0.0.1:{app_port}", "--workers", str(args.workers),
                    "--graceful-timeout", "5", "--timeout", "60", "--log-level", "warning",
                ],
                env,
                Path(tmp) / "gunicorn.log",
            )  # fmt: skip
            servers.append(gunicorn)
            gunicorn.wait_until(
                lambda: requests.get(base + "/api/v1/me", timeout=2).status_code > 0,
                args.start_timeout,
            )
            print(
                f"gunicorn on {base}: {args.workers} uvicorn worker(s) on {os.cpu_count()} CPUs, "
                + ("a connection per request" if args.no_pool else "psycopg's pool")
                + f"; MCP protocol {args.protocol}",
                flush=True,
            )
            clients = [Client(base, buyer, args.protocol) for buyer in buyers]
            same = all(in_parallel(clients, Client.same_answer))
            for _ in range(3):  # warm-up, untimed
                warm = in_parallel(clients, Client.mcp) + in_parallel(clients, Client.rest)
                if not all(s.good for s in warm):
                    raise RuntimeError(f"warm-up failed: statuses {[s.status for s in warm]}")
            cpu = CpuMeter(gunicorn.proc.pid, sandbox.proc.pid, postmaster_pid())
            window = args.seconds / args.rounds
            for number in range(args.rounds):
                order = [mcp, rest] if number % 2 == 0 else [rest, mcp]
                for phase in order:
                    call = Client.mcp if phase is mcp else Client.rest
                    done = run_phase(phase.name, clients, call, window, cpu)
                    phase.add(done)
                    progress(
                        f"round {number + 1}, {phase.name}: {done.rate:.1f} ok/s, p50 "
                        f"{done.latency_ms(50):.1f} ms, not ok {len(done.samples) - done.good}, "
                        f"other load {done.cores['other']:.2f} cores"
                    )
        finally:
            with signals_held():  # a second Ctrl-C must not leave a server or the database
                for server in reversed(servers):
                    server.stop()
                if "django" in sys.modules:
                    from django.db import connections

                    from config.celery_app import app

                    connections.close_all()
                    try:
                        app.control.purge()
                    except Exception as exc:  # the bench's result stands without it
                        progress(f"could not purge the bench's broker queue: {exc}")
                database.drop()

    ratio = mcp.rate / rest.rate if rest.rate else math.nan
    summary = [*phase_lines(mcp), *phase_lines(rest)]
    summary += [
        ("same envelope on both:", "yes" if same else "NO: the answers differ"),
        ("throughput ratio MCP / REST:", f"{ratio:.3f} (target >= {RATIO_TARGET})"),
        *split,
    ]
    width = max(len(label) for label, _ in summary) + 2
    print()
    for label, value in summary:
        print(f"{label:<{width}}{value}")
    print(f"(total {time.perf_counter() - started:.0f} s)")
    missed = [
        what
        for what, bad in (
            ("throughput ratio", not ratio >= RATIO_TARGET),
            ("same answer", not same),
            ("errors", mcp.non_2xx + rest.non_2xx > 0 or mcp.good < len(mcp.samples)),
        )
        if bad
    ]
    if missed:
        print(f"MISSED: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
