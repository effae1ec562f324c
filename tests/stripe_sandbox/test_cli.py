"""`python -m stripe_sandbox` as a separate process, the way `make run` and demos start it."""

import signal
import socket
import subprocess
import sys
from pathlib import Path

import stripe

from tests.helpers import Receiver, free_port, paid_charge, wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_command_line_serves_and_delivers_signed_webhooks(receiver: Receiver) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "stripe_sandbox", "--port", str(port),
         "--webhook-url", receiver.url, "--webhook-secret", "whsec_cli"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert (
            process.stdout.readline().strip()
            == f"Stripe sandbox listening on http://127.0.0.1:{port}"
        )
        client = stripe.StripeClient(
            "sk_test_cli", base_addresses={"api": f"http://127.0.0.1:{port}"}, max_network_retries=0
        )
        paid_charge(client)
        wait_until(lambda: len(receiver.deliveries) == 3, what="three signed deliveries")
        for body, headers in receiver.deliveries:
            stripe.Webhook.construct_event(body.decode(), headers["Stripe-Signature"], "whsec_cli")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def test_command_line_errors_are_clear() -> None:
    lonely = subprocess.run(
        [sys.executable, "-m", "stripe_sandbox", "--webhook-url", "http://127.0.0.1:1/x"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert lonely.returncode == 2
    assert "--webhook-url and --webhook-secret go together" in lonely.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [sys.executable, "-m", "stripe_sandbox", "--port", str(port)],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    assert busy.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr


def test_command_line_state_file_survives_a_restart(tmp_path: Path) -> None:
    """`--state-file`: what `make run` gives it, beside the database; saved at SIGTERM or SIGINT."""
    state_file = tmp_path / "stripe-sandbox.state"
    charges = []
    for stop in (signal.SIGINT, signal.SIGTERM):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "stripe_sandbox", "--port", str(port),
             "--state-file", str(state_file)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            assert process.stdout.readline().startswith("Stripe sandbox listening on")
            client = stripe.StripeClient(
                "sk_test_cli", base_addresses={"api": f"http://127.0.0.1:{port}"},
                max_network_retries=0,
            )  # fmt: skip
            assert [c.id for c in client.v1.charges.list().data] == charges[::-1]
            charges.append(paid_charge(client))
        finally:
            process.send_signal(stop)
            assert process.wait(timeout=10) == 0
    assert state_file.exists()


def test_command_line_refuses_an_unreadable_state_file_in_one_line(tmp_path: Path) -> None:
    state_file = tmp_path / "stripe-sandbox.state"
    state_file.write_bytes(b"stripe_sandbox state, format 0\n...")
    refused = subprocess.run(
        [sys.executable, "-m", "stripe_sandbox", "--port", str(free_port()),
         "--state-file", str(state_file)],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert str(state_file) in refused.stderr
    assert "make reset" in refused.stderr
