"""What a run keeps of each provider read (SPEC §15.1): the bytes the provider sent, compressed,
with their SHA-256 — so the evidence behind a discrepancy can be hashed again and matched, and
read again from the provider and compared byte for byte. The listing reads the next page while
the current one is compared, in a thread that leaves no database connection behind. Observations
stored before bodies were kept (their answer as parsed JSON) survive the migration as they were."""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

import pytest
import stripe
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from reconciliation.engine import ReconciliationIncomplete, reconcile
from reconciliation.models import Discrepancy, Observation, Run
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.reconciliation.test_classes import funded, refunded

LISTED = ("refunds", "charges", "disputes")


def provider_bytes(sdk: stripe.StripeClient, path: str, params: dict[str, Any]) -> bytes:
    """What the provider sends for the same request now, byte for byte."""
    return sdk.raw_request("get", path, **params).body.encode("utf-8")


@pytest.mark.django_db
def test_each_page_is_stored_as_the_bytes_received_and_they_hash_to_its_sha256(
    alice: Api, sdk: stripe.StripeClient
) -> None:
    data, _ = funded(alice)
    refunded(alice, data["envelope_id"], 2_000_000)
    run = reconcile(kind="manual")
    pages = list(Observation.objects.filter(run=run, kind__in=LISTED).order_by("id"))
    assert [page.kind for page in pages] == list(LISTED)
    for page in pages:
        stored = page.body_bytes()
        assert stored is not None, page.kind
        assert page.body_length == len(stored)
        assert hashlib.sha256(stored).hexdigest() == page.sha256, page.kind
        assert page.sha256_matches() is True
        # The bytes the provider sent, not a re-encoding of them: it sends the same again.
        again = provider_bytes(sdk, page.request["path"], page.request["params"])
        assert stored == again, page.kind
        assert page.data is None  # the parsed copy is not kept twice
    refunds, charges, _ = pages
    assert [r["id"] for r in refunds.listed()] == [
        json.loads(provider_bytes(sdk, "/v1/refunds", refunds.request["params"]))["data"][0]["id"]
    ]
    # A charges page as Stripe lists it: each charge's amount refunded, never its refunds
    # (included only when expanded, since API 2022-11-15); kept as sent, compressed.
    [charge] = charges.listed()
    assert "refunds" not in charge
    assert charge["amount_refunded"] == refunds.listed()[0]["amount"]
    assert len(bytes(charges.body)) < charges.body_length


@pytest.mark.django_db
def test_an_object_read_alone_is_stored_with_the_sha256_of_the_bytes_received(
    alice: Api, stripe_at_sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    _, funding = funded(alice)
    stripe_at_sandbox.tamper(funding.charge_id, amount=999)
    reconcile(kind="manual")
    stripe_at_sandbox.tamper(funding.charge_id, amount=1000)
    third = reconcile(kind="manual")
    discrepancy = Discrepancy.objects.get()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")
    read = discrepancy.cleared_by
    assert read is not None
    assert (read.run, read.kind, read.request["path"]) == (
        third,
        "charge",
        f"/v1/charges/{funding.charge_id}",
    )
    # The provider's answer as it sent it: anyone can read the charge again and match the hash.
    sent = provider_bytes(sdk, f"/v1/charges/{funding.charge_id}", {})
    assert read.sha256 == hashlib.sha256(sent).hexdigest()
    assert read.body_bytes() == sent
    assert read.answer()["amount"] == 1000


@pytest.mark.django_db
def test_a_refused_read_is_kept_as_its_error(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    _, funding = funded(alice)
    stripe_at_sandbox.forget(funding.charge_id)
    reconcile(kind="manual")
    observation = Discrepancy.objects.get(code="charge_missing").observation
    assert observation is not None
    assert observation.answer() == {"error": "resource_missing", "id": funding.charge_id}
    assert observation.sha256_matches() is True


def backends() -> int:
    """Connections to the test database other than this one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_the_listing_thread_leaves_no_connection_open_also_when_a_page_cannot_be_read(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    settings.RECONCILIATION_MAX_RPS = 50  # the budget on: the reading thread uses the database
    data, _ = funded(alice)
    refunded(alice, data["envelope_id"], 1_000_000)
    before = backends()
    done = reconcile(kind="manual")
    assert done.status == "completed"
    assert done.compared == {"refund": 1, "charge": 1}
    assert backends() == before

    stripe_at_sandbox.add_fault("/v1/charges", "server_error", method="GET")
    with pytest.raises(ReconciliationIncomplete):
        reconcile(kind="manual")
    failed = Run.objects.order_by("-id").first()
    assert failed is not None
    assert failed.status == "failed"
    # The refunds it had read, page and checkpoint; nothing of the page it could not read.
    assert failed.checkpoint == {"phase": "refunds", "done": True}
    assert list(failed.observations.values_list("kind", flat=True)) == ["refunds"]
    assert backends() == before


@pytest.mark.django_db(transaction=True)
def test_observations_stored_as_json_survive_the_migration_and_are_shown_as_legacy() -> None:
    executor = MigrationExecutor(connection)
    before = [("reconciliation", "0002_cursor_run_observation_discrepancy_seen")]
    after = [("reconciliation", "0003_observation_body")]
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        old_run, old_observation = (
            apps.get_model("reconciliation", m) for m in ("Run", "Observation")
        )
        now = timezone.now()
        run = old_run.objects.create(
            kind="sweep",
            lane="objects",
            status="completed",
            window_start=now,
            window_end=now,
            started_at=now,
            heartbeat_at=now,
        )
        page = [{"id": "re_legacy", "object": "refund", "amount": 150}]
        old_observation.objects.create(
            run=run,
            kind="refunds",
            request={"path": "/v1/refunds", "params": {"limit": 100}},
            data=page,
            sha256="a" * 64,
            observed_at=now,
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        # And every later migration (of any app) back, as the other tests expect the schema.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    legacy = Observation.objects.get(run__pk=run.pk)
    assert (legacy.data, legacy.body, legacy.body_length) == (page, None, 0)
    assert legacy.listed() == page
    assert legacy.answer() == page
    assert legacy.sha256_matches() is None  # nothing to hash: the bytes were never kept
    assert legacy.sha256 == "a" * 64


def test_the_stored_bytes_are_zlib_of_the_body() -> None:
    body = b'{"object": "list", "data": [{"id": "re_1"}], "has_more": false}'
    observation = Observation(
        kind="refunds",
        body=zlib.compress(body, 1),
        body_length=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
    )
    assert observation.body_bytes() == body
    assert observation.listed() == [{"id": "re_1"}]
    assert observation.sha256_matches() is True
    observation.sha256 = hashlib.sha256(body + b" ").hexdigest()
    assert observation.sha256_matches() is False
