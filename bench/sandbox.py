"""Benchmark: refund creations per second through the official `stripe` SDK, from N threads.

Measured: the wall-clock rate of successful `client.v1.refunds.create` calls (1 cent each, with
metadata) made by N threads, each on its own big charge, against (1) our `stripe_sandbox` and
(2) localstripe, which runs from its own virtualenv (bench/.venv-localstripe, GPL: never a project
dependency). Setup (server start, charge creation) is outside the timed window.

Run from the repo root: .venv/bin/python bench/sandbox.py [--seconds 10] [--threads 4]
    [--skip-localstripe] [--sandbox-port P] [--localstripe-port P] (ports also from
    BENCH_SANDBOX_PORT, BENCH_LOCALSTRIPE_PORT; by default free ones)
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import stripe

REPO = Path(__file__).resolve().parent.parent
# Run as `python bench/sandbox.py`, sys.path[0] is bench/: put the repo root there instead, for
# `bench.refund_api` (and so that no file of bench/ shadows a package of the project).
if sys.path and Path(sys.path[0]).resolve() == REPO / "bench":
    sys.path[0] = str(REPO)
elif str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.refund_api import add_port_flag, port_or_free  # noqa: E402 - after the path fix

LS_VENV = REPO / "bench" / ".venv-localstripe"
CHARGE_CENTS = 9_000_000  # $90,000.00 per thread: far more 1-cent refunds than a run can make
MAX_REFUNDS_PER_THREAD = 1_000_000  # a hard bound on count, besides the time bound
START_TIMEOUT_S = 30.0
INSTALL_TIMEOUT_S = 600.0


@dataclass
class Worker:
    """One thread's charge and what it made on it."""

    charge_id: str
    refunds: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class Result:
    """One target's measurement: `refunds` made in `elapsed` seconds of the timed window."""

    workers: list[Worker]
    elapsed: float
    refunds: int
    errors: list[str]


def http_json(url: str, body: dict[str, Any] | None = None) -> Any:
    """GET (or POST a JSON body to) the sandbox's control API and decode the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    # S310: the URL is always our own http://127.0.0.1 sandbox, never user input.
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return json.load(response)


def start_server(name: str, cmd: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start a server subprocess (output to `log`) and wait until its port accepts connections."""
    with log.open("wb") as out:
        # S603: cmd is our own fixed argv (sys.executable or the bench venv's localstripe).
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{name} exited with status {proc.returncode}:\n{tail}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.1)
    stop_server(proc)
    raise RuntimeError(f"{name} did not listen on port {port} within {START_TIMEOUT_S:.0f} s")


def stop_server(proc: subprocess.Popen[bytes] | None) -> None:
    """Terminate a server subprocess, killing it if it does not exit within 5 s."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def make_client(url: str) -> stripe.StripeClient:
    """An SDK client pointed at a local server, without retries (each call is one request)."""
    return stripe.StripeClient(
        api_key="sk_test_bench",
        base_addresses={"api": url, "files": url},
        max_network_retries=0,
    )


def create_charge(client: stripe.StripeClient, *, current_api: bool = True) -> str:
    """Create and confirm a PaymentIntent for CHARGE_CENTS; return its charge's id. At the pinned
    API version a server-side card confirmation names its payment method types
    (`allowed_payment_method_types`); localstripe (`current_api=False`) predates that
    parameter."""
    params: dict[str, object] = {
        "amount": CHARGE_CENTS,
        "currency": "usd",
        "payment_method": "pm_card_visa",
        "confirm": True,
    }
    if current_api:
        params["allowed_payment_method_types"] = ["card"]
    intent = client.v1.payment_intents.create(params=params)  # type: ignore[arg-type]
    if intent.status != "succeeded" or not intent.latest_charge:
        raise RuntimeError(f"PaymentIntent {intent.id} did not succeed: {intent.status}")
    charge = intent.latest_charge  # an id in Stripe; localstripe sends the expanded charge
    return charge if isinstance(charge, str) else str(charge.id)


def refund_loop(client: stripe.StripeClient, worker: Worker, index: int, end: float) -> None:
    """Create 1-cent refunds on the worker's charge until `end` (time.monotonic) or the cap."""
    while time.monotonic() < end and worker.refunds < MAX_REFUNDS_PER_THREAD:
        metadata = {"bench": "1", "thread": str(index), "seq": str(worker.refunds)}
        try:
            client.v1.refunds.create(
                params={"charge": worker.charge_id, "amount": 1, "metadata": metadata}
            )
        except stripe.StripeError as exc:
            worker.errors.append(f"thread {index}: {type(exc).__name__}: {exc}")
            if len(worker.errors) >= 10:
                return
            continue
        worker.refunds += 1


def run_workload(name: str, url: str, threads: int, seconds: float) -> Result:
    """Create one charge per thread (untimed), then time `threads` threads creating refunds."""
    clients = [make_client(url) for _ in range(threads)]
    workers = [Worker(create_charge(client, current_api=name == "sandbox")) for client in clients]
    start = time.monotonic()
    pool = [
        threading.Thread(target=refund_loop, args=(c, w, i, start + seconds), daemon=True)
        for i, (c, w) in enumerate(zip(clients, workers, strict=True))
    ]
    for thread in pool:
        thread.start()
    last_time, last_done = start, 0
    while any(thread.is_alive() for thread in pool):
        time.sleep(0.2)
        now, done = time.monotonic(), sum(w.refunds for w in workers)
        if now - last_time >= 1.0:
            rate = (done - last_done) / (now - last_time)
            print(f"  {name}: {now - start:5.1f} s, {done:6d} refunds, last second {rate:.0f}/s")
            last_time, last_done = now, done
    errors = [e for w in workers for e in w.errors]
    return Result(workers, time.monotonic() - start, sum(w.refunds for w in workers), errors)


def summary(name: str, result: Result, threads: int) -> str:
    """The one-line figure for a target."""
    rate = result.refunds / result.elapsed if result.elapsed else 0.0
    return (
        f"{name:<11} refunds/s: {rate:.1f}  ({result.refunds} refunds in "
        f"{result.elapsed:.1f} s, {threads} threads)"
    )


def check_sandbox(url: str, result: Result) -> list[str]:
    """Compare the sandbox's own state with what the threads counted; return the mismatches."""
    state = http_json(f"{url}/_sandbox/state")
    problems = [f"request error: {e}" for e in result.errors[:5]]
    if state["counts"]["refunds"] != result.refunds:
        problems.append(
            f"sandbox holds {state['counts']['refunds']} refunds, made {result.refunds}"
        )
    for worker in result.workers:
        held = state["charges"].get(worker.charge_id, {}).get("amount_refunded")
        if held != worker.refunds:
            problems.append(f"{worker.charge_id}: amount_refunded {held}, made {worker.refunds}")
    return problems


def bench_sandbox(args: argparse.Namespace, logdir: Path) -> tuple[str, bool]:
    """Measure the sandbox and check its state; return the summary line and whether it passed."""
    port = port_or_free(args.sandbox_port)
    url = f"http://127.0.0.1:{port}"
    # Limits lifted: this measures the sandbox's own speed (against stripe-mock's), which
    # Stripe's 25 a second (enforced by default) would cap at 25.
    cmd = [sys.executable, "-m", "stripe_sandbox", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--rate-limits", "off"]
    proc = start_server("stripe_sandbox", cmd, port, logdir / "sandbox.log")
    try:
        http_json(f"{url}/_sandbox/reset", {})
        print(f"sandbox: measuring {url} for {args.seconds:.0f} s with {args.threads} threads")
        result = run_workload("sandbox", url, args.threads, args.seconds)
        problems = check_sandbox(url, result)
    finally:
        stop_server(proc)
    for problem in problems:
        print(f"CHECK FAILED: {problem}", file=sys.stderr)
    if not problems:
        print(f"check passed: sandbox holds {result.refunds} refunds, amount_refunded matches")
    return summary("sandbox", result, args.threads), not problems


def install_localstripe() -> Path:
    """Create bench/.venv-localstripe and pip-install localstripe there if it is missing."""
    exe = LS_VENV / "bin" / "localstripe"
    if not exe.exists():
        print(f"localstripe: installing into {LS_VENV.relative_to(REPO)} (GPL, bench only)")
        pip = [str(LS_VENV / "bin" / "python"), "-m", "pip", "install", "-q", "localstripe"]
        for step in ([sys.executable, "-m", "venv", str(LS_VENV)], pip):
            # S603: a fixed argv (venv creation, pip install of a fixed package name).
            done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)  # noqa: S603
            if done.returncode != 0:
                raise RuntimeError(f"{step[2]} failed: {done.stderr.strip()[-800:]}")
    return exe


def bench_localstripe(args: argparse.Namespace, logdir: Path) -> str:
    """Measure localstripe with the same workload; return its summary line or why it could not."""
    proc = None
    try:
        exe = install_localstripe()
        port = port_or_free(args.localstripe_port)
        # --from-scratch: do not load the state an earlier run pickled to /tmp/localstripe.pickle
        cmd = [str(exe), "--port", str(port), "--from-scratch"]
        proc = start_server("localstripe", cmd, port, logdir / "localstripe.log")
        url = f"http://127.0.0.1:{port}"
        print(f"localstripe: measuring {url} for {args.seconds:.0f} s with {args.threads} threads")
        result = run_workload("localstripe", url, args.threads, args.seconds)
        for error in result.errors[:5]:
            print(f"localstripe request error: {error}", file=sys.stderr)
        client = make_client(url)
        held = [client.v1.charges.retrieve(w.charge_id).amount_refunded for w in result.workers]
        made = [w.refunds for w in result.workers]
        verdict = "matches" if held == made else f"MISMATCH: charges hold {held}, made {made}"
        print(f"localstripe: amount_refunded per charge {verdict}")
        return summary("localstripe", result, args.threads)
    except (RuntimeError, OSError, subprocess.SubprocessError, stripe.StripeError) as exc:
        return f"localstripe not measured: {type(exc).__name__}: {exc}"
    finally:
        stop_server(proc)


def interrupt(signum: int, frame: object) -> None:
    """Turn SIGTERM into KeyboardInterrupt, so the `finally` blocks stop the servers."""
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Refunds/s through the stripe SDK.")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed window per target")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--skip-localstripe", action="store_true")
    add_port_flag(parser, "--sandbox-port", "the stripe_sandbox's port")
    add_port_flag(parser, "--localstripe-port", "localstripe's port")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, measure both targets, print the summary; 1 if the sandbox check failed."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 600 or not 1 <= args.threads <= 64:
        parser.error("--seconds must be in (0, 600] and --threads in [1, 64]")
    signal.signal(signal.SIGTERM, interrupt)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        try:
            line, ok = bench_sandbox(args, Path(tmp))
            lines = [line]
            if args.skip_localstripe:
                lines.append("localstripe not measured: --skip-localstripe")
            else:
                lines.append(bench_localstripe(args, Path(tmp)))
        except KeyboardInterrupt:
            print("interrupted; servers stopped", file=sys.stderr)
            return 130
    print("\n".join(["", *lines]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
