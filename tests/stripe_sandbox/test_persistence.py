"""A sandbox with a state file keeps Stripe's side across a restart (`make run` after Ctrl-C):
objects, their order, idempotency keys with their stored answers, the clock, the webhook endpoints
added through the control API and the deliveries still owed to them."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import stripe

from stripe_sandbox import SandboxServer
from stripe_sandbox.client import SandboxControl
from stripe_sandbox.persistence import StateFileError
from tests.helpers import Receiver, paid_charge, wait_until


@contextmanager
def running(state_file: Path) -> Iterator[tuple[stripe.StripeClient, SandboxControl]]:
    """A sandbox on a free port keeping its state in `state_file`, stopped (and saved) on exit."""
    server = SandboxServer(port=0, state_file=state_file).start()
    try:
        client = stripe.StripeClient(
            "sk_test_persistence", base_addresses={"api": server.url}, max_network_retries=0
        )
        yield client, SandboxControl(server.url)
    finally:
        server.stop()


def test_a_restarted_sandbox_holds_the_charge_its_refunds_and_the_keys(tmp_path: Path) -> None:
    state_file = tmp_path / "var" / "stripe-sandbox.state"
    params = {"charge": "", "amount": 300, "metadata": {"vouch_leg": "leg_1"}}
    with running(state_file) as (client, sandbox):
        charge_id = paid_charge(client, 1000)
        params["charge"] = charge_id
        first = client.v1.refunds.create(params=params, options={"idempotency_key": "erf_1:leg_1"})
        second = client.v1.refunds.create(params={"charge": charge_id, "amount": 200})
        disputed_id = paid_charge(client, 900)
        dispute = sandbox.open_dispute(disputed_id, reason="fraudulent", amount=500)
        sandbox.advance_clock(3600)
        before = sandbox.state()
    assert state_file.exists()

    with running(state_file) as (client, sandbox):
        assert client.v1.charges.retrieve(charge_id).amount_refunded == 500
        assert client.v1.charges.retrieve(disputed_id).disputed
        listed = client.v1.refunds.list(params={"charge": charge_id})
        assert [r.id for r in listed.data] == [second.id, first.id]  # newest first, as before
        assert client.v1.disputes.retrieve(dispute["id"]).amount == 500
        # The key still holds its answer: a retry is a replay, not a second refund.
        again = client.v1.refunds.create(params=params, options={"idempotency_key": "erf_1:leg_1"})
        assert again.id == first.id
        assert again.last_response.headers["Idempotent-Replayed"] == "true"
        assert again.last_response.headers["Original-Request"] == first.last_response.request_id
        after = sandbox.state()
        assert after["charges"] == before["charges"]
        assert after["counts"] == before["counts"]
        assert after["clock_offset_s"] == before["clock_offset_s"] == 3600
        # Made after the restart, in the same order and with fresh ids.
        third = client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
        assert client.v1.refunds.list(params={"charge": charge_id}).data[0].id == third.id


def test_changes_are_saved_soon_without_a_clean_stop(tmp_path: Path) -> None:
    """What a kill -9 leaves: the file as saved a moment after the last change."""
    state_file = tmp_path / "stripe-sandbox.state"
    with running(state_file) as (client, _):
        charge_id = paid_charge(client, 700)

        def saved() -> bool:
            if not state_file.exists():
                return False
            with running(state_file) as (other, _):
                return bool(other.v1.charges.list().data)

        wait_until(saved, timeout=5, what="the charge to reach the state file")
        with running(state_file) as (other, _):
            assert other.v1.charges.retrieve(charge_id).amount == 700


def test_reset_empties_the_state_file(tmp_path: Path) -> None:
    state_file = tmp_path / "stripe-sandbox.state"
    with running(state_file) as (client, sandbox):
        paid_charge(client)
        sandbox.reset()
    with running(state_file) as (client, sandbox):
        assert client.v1.charges.list().data == []
        assert set(sandbox.state()["counts"].values()) == {0}


def test_webhook_endpoints_and_owed_deliveries_survive(tmp_path: Path, receiver: Receiver) -> None:
    state_file = tmp_path / "stripe-sandbox.state"
    receiver.statuses = [500, 500, 500]  # each of the charge's three events fails once
    with running(state_file) as (client, sandbox):
        sandbox.add_webhook(receiver.url, "whsec_kept", backoff_ms=600_000)
        paid_charge(client)
        wait_until(lambda: len(receiver.deliveries) == 3, what="three failed deliveries")
    # Retried ten minutes later at the earliest, had the sandbox run on; it restarts at once.
    with running(state_file) as (client, sandbox):
        endpoints = sandbox.webhooks()["endpoints"]
        assert [e["url"] for e in endpoints] == [receiver.url]
        wait_until(lambda: len(receiver.deliveries) == 6, what="the owed deliveries")
        for body, headers in receiver.deliveries[3:]:
            stripe.Webhook.construct_event(body.decode(), headers["Stripe-Signature"], "whsec_kept")
        wait_until(
            lambda: all(e.pending_webhooks == 0 for e in client.v1.events.list().data),
            what="pending_webhooks to count down",
        )


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"not a state file at all", "not a Stripe sandbox state file"),
        (b"stripe_sandbox state, format 0\n...", "another version of the sandbox"),
        (b"stripe_sandbox state, format 1\n\x80\x05truncated", "cannot be read"),
    ],
)
def test_an_unreadable_state_file_is_refused_with_a_way_out(
    tmp_path: Path, content: bytes, says: str
) -> None:
    state_file = tmp_path / "stripe-sandbox.state"
    state_file.write_bytes(content)
    with pytest.raises(StateFileError) as raised:
        SandboxServer(port=0, state_file=state_file)
    message = str(raised.value)
    assert says in message
    assert str(state_file) in message
    assert "make reset" in message
    assert "\n" not in message
    assert state_file.read_bytes() == content  # left as it was, for the person to look at


def _rewrite_without_world_field(state_file: Path, name: str) -> None:
    """Make `state_file` what the previous version of the sandbox wrote: its World without the
    field `name` (a field added since, with a default)."""
    import pickle

    header, _, rest = state_file.read_bytes().partition(b"\n")
    payload = pickle.loads(rest)  # noqa: S301 - the file this test's sandbox just wrote
    del payload["world"][name]
    payload["schema"]["World"].remove(name)
    state_file.write_bytes(header + b"\n" + pickle.dumps(payload))


def test_a_state_file_from_before_a_new_world_field_loads_with_its_default(
    tmp_path: Path,
) -> None:
    """Issue 41: a restart keeps the sandbox's objects. The sandbox gained a World field with a
    default (`reference_delay_ms`); a state file written before it is loaded, the new field at
    its default, rather than refused (which made a person `make reset` their database too)."""
    state_file = tmp_path / "stripe-sandbox.state"
    with running(state_file) as (client, _sandbox):
        charge_id = paid_charge(client, 1000)
    _rewrite_without_world_field(state_file, "reference_delay_ms")

    with running(state_file) as (client, sandbox):
        assert client.v1.charges.retrieve(charge_id).amount == 1000
        assert sandbox.state()["reference_delay_ms"] == 5000


def test_a_state_file_from_a_newer_sandbox_is_still_refused(tmp_path: Path) -> None:
    """A World field this code does not know (a file a newer sandbox wrote) is never dropped."""
    import pickle

    state_file = tmp_path / "stripe-sandbox.state"
    with running(state_file) as (client, _sandbox):
        paid_charge(client, 1000)
    header, _, rest = state_file.read_bytes().partition(b"\n")
    payload = pickle.loads(rest)  # noqa: S301 - the file this test's sandbox just wrote
    payload["world"]["a_later_field"] = 1
    payload["schema"]["World"].append("a_later_field")
    state_file.write_bytes(header + b"\n" + pickle.dumps(payload))
    with pytest.raises(StateFileError) as raised:
        SandboxServer(port=0, state_file=state_file)
    assert "another version of the sandbox" in str(raised.value)
