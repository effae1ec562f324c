"""Idempotency rules that need no request (SPEC §4): which keys are accepted (1 to 255 printable
ASCII characters), how an operation is named and kept within its column (stable, distinct per
id), how a body is compared (canonical JSON; no body equals `{}`), and how long a running request
holds its key (Vouch's margin plus the provider's retry budget per call it is about to make)."""

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from accounts.models import User
from core import db
from core.api.responses import error_body
from core.exceptions import VouchError
from core.idempotency import (
    OPERATION_MAX_LENGTH,
    SURFACE_MCP,
    SURFACE_REST,
    Claim,
    IdempotencyKeyConflict,
    IdempotencyKeyInUse,
    IdempotencyKeyOtherSurface,
    InvalidIdempotencyKey,
    StoredAnswer,
    body_digest,
    idempotency_attach,
    idempotency_attach_statements,
    idempotency_attached,
    idempotency_claim,
    idempotency_drop,
    idempotency_lease_end,
    idempotency_prune,
    idempotency_renew,
    idempotency_settle_error,
    idempotency_store,
    idempotent_run,
    lease_for,
    operation_bounded,
    operation_name,
    render_json,
    validate_key,
)
from core.models import IdempotencyRecord

BUDGET_CALLS: list[int] = []


def seven_and_a_half_seconds() -> float:
    """A provider retry budget for these tests (IDEMPOTENCY_PROVIDER_BUDGET names it)."""
    BUDGET_CALLS.append(1)
    return 7.5


# --- the key --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "a",  # the shortest
        "k" * 255,  # the longest
        " ",  # 0x20, the first printable character
        "~",  # 0x7E, the last
        "refund-2026-01-02T03:04:05Z #1 {x}",
        "".join(chr(c) for c in range(0x20, 0x7F)),  # every printable ASCII character
    ],
)
def test_a_key_of_1_to_255_printable_ascii_characters_is_accepted(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    "key",
    [
        "",  # too short
        "k" * 256,  # too long
        "key\x1f",  # a control character just below the printable range
        "key\x7f",  # DEL, just above it
        "key\n",
        "key\t",
        "clé",  # not ASCII
        "key\u00a0",
        "k" * 254 + "\x00",
    ],
)
def test_any_other_key_is_refused_as_invalid(key: str) -> None:
    with pytest.raises(InvalidIdempotencyKey) as caught:
        validate_key(key)
    assert (caught.value.code, caught.value.status_code) == ("invalid_idempotency_key", 400)


# --- the operation ---------------------------------------------------------------------------


def test_an_operation_is_the_action_and_its_ids_joined_by_colons() -> None:
    assert operation_name("envelope.refund", "env_A") == "envelope.refund:env_A"
    assert operation_name("envelope.refund", "env_B") != operation_name("envelope.refund", "env_A")
    assert operation_name("envelope.top_up", "env_A") != operation_name("envelope.refund", "env_A")
    assert operation_name("dispute.respond", "dp_1", 7) == "dispute.respond:dp_1:7"
    assert operation_name("envelope.create") == "envelope.create"


def test_an_operation_name_that_fits_its_column_is_kept_as_it_is() -> None:
    name = "envelope.refund:" + "e" * (OPERATION_MAX_LENGTH - len("envelope.refund:"))
    assert len(name) == OPERATION_MAX_LENGTH == 255
    assert operation_bounded(name) == name
    assert operation_name("envelope.refund", name.split(":", 1)[1]) == name


def test_a_longer_operation_name_becomes_its_action_and_a_digest_of_the_whole_name() -> None:
    name = "envelope.refund:" + "e" * (OPERATION_MAX_LENGTH - len("envelope.refund:") + 1)
    assert len(name) == 256
    digest = hashlib.sha256(name.encode()).hexdigest()
    assert operation_bounded(name) == f"envelope.refund:/sha256/{digest}"
    assert operation_name("envelope.refund", name.split(":", 1)[1]) == operation_bounded(name)


def test_a_digested_operation_name_is_stable_distinct_and_fits() -> None:
    first = operation_name("envelope.refund", "x" * 300)
    assert operation_name("envelope.refund", "x" * 300) == first  # a retry replays
    assert operation_name("envelope.refund", "x" * 299 + "y") != first  # another id
    assert operation_name("envelope.top_up", "x" * 300) != first  # another action
    assert len(first) <= OPERATION_MAX_LENGTH
    assert "/" in first  # never equal to a name that fits (an id from a path has no `/`)


def test_a_very_long_action_is_cut_to_100_characters_before_the_digest() -> None:
    action = "a" * 400  # no colon: the whole name is its action
    bounded = operation_bounded(action)
    assert bounded == "a" * 100 + ":/sha256/" + hashlib.sha256(action.encode()).hexdigest()
    assert len(bounded) == 100 + len(":/sha256/") + 64 <= OPERATION_MAX_LENGTH


def test_a_non_ascii_name_is_digested_from_its_utf8_bytes() -> None:
    name = "envelope.refund:" + "é" * 250
    expected = hashlib.sha256(name.encode("utf-8")).hexdigest()
    assert operation_bounded(name) == f"envelope.refund:/sha256/{expected}"


# --- the body --------------------------------------------------------------------------------


def test_no_body_equals_an_empty_object() -> None:
    empty = hashlib.sha256(b"{}").hexdigest()
    assert body_digest(None) == body_digest("") == body_digest({}) == empty


def test_a_body_is_compared_as_canonical_json() -> None:
    """Sorted keys, no spaces: the same body however it was spelled gives the same digest."""
    expected = hashlib.sha256(b'{"amount_micro":5000000,"note":{"a":1,"b":[1,2]}}').hexdigest()
    assert body_digest({"note": {"b": [1, 2], "a": 1}, "amount_micro": 5_000_000}) == expected
    spelled = json.loads('{ "amount_micro" : 5000000 , "note" : { "a" : 1, "b" : [1, 2] } }')
    assert body_digest(spelled) == expected


@pytest.mark.parametrize(
    "other",
    [
        {"amount_micro": 5_000_001},
        {"amount_micro": "5000000"},
        {"amount_micro": 5_000_000, "extra": None},
        [],
        0,
    ],
)
def test_another_body_gives_another_digest(other: Any) -> None:
    assert body_digest(other) != body_digest({"amount_micro": 5_000_000})
    assert body_digest(other) != body_digest({})


def test_a_body_digest_is_sha256_hex() -> None:
    digest = body_digest({"a": 1})
    assert digest == hashlib.sha256(b'{"a":1}').hexdigest()
    assert len(digest) == 64


# --- the lease -------------------------------------------------------------------------------


@pytest.fixture
def budget(settings: Any) -> list[int]:
    settings.IDEMPOTENCY_LEASE_MARGIN_S = 10
    settings.IDEMPOTENCY_PROVIDER_BUDGET = f"{__name__}.seven_and_a_half_seconds"
    BUDGET_CALLS.clear()
    return BUDGET_CALLS


@pytest.mark.parametrize(("calls", "seconds"), [(1, 17.5), (2, 25.0), (3, 32.5)])
def test_a_lease_is_the_margin_plus_the_budget_of_each_provider_call(
    budget: list[int], calls: int, seconds: float
) -> None:
    assert lease_for(provider_calls=calls) == timedelta(seconds=seconds)


def test_a_request_that_calls_no_provider_holds_its_key_for_the_margin_alone(
    budget: list[int], settings: Any
) -> None:
    assert lease_for(provider_calls=0) == timedelta(seconds=10)
    assert budget == []  # the provider's budget is not even asked for
    settings.IDEMPOTENCY_PROVIDER_BUDGET = "no.such.module.budget"
    assert lease_for(provider_calls=0) == timedelta(seconds=10)


def test_the_margin_is_read_from_the_settings(budget: list[int], settings: Any) -> None:
    settings.IDEMPOTENCY_LEASE_MARGIN_S = "2.5"  # as an environment variable gives it
    assert lease_for(provider_calls=0) == timedelta(seconds=2.5)
    assert lease_for(provider_calls=1) == timedelta(seconds=10)


# --- the record: claim, replay, refuse, resume (with the database) ---------------------------


class Declined(VouchError):
    """A refusal that ends the operation at the provider: its answer is kept under the key."""

    code = "test_declined"
    status_code = 402
    stores_idempotent_response = True


class Invalid(VouchError):
    """A refusal that changed nothing: the client corrects and retries under the same key."""

    code = "test_invalid"
    status_code = 400


START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OPERATION = "envelope.refund:env_A"


@pytest.fixture
def user(db: None) -> User:
    return User.objects.create_user("ida", "ida@example.com", "pw-ida-123")


def _claim(user: User, *, surface: str = SURFACE_REST, body: Any = None, **kw: Any) -> Claim:
    return idempotency_claim(
        user=user,
        key=kw.pop("key", "k-1"),
        operation=kw.pop("operation", OPERATION),
        surface=surface,
        body=body if body is not None else {"amount_micro": 1},
        **kw,
    )


def _run(user: User, action: Any, *, body: Any = None, surface: str = SURFACE_REST) -> Any:
    return idempotent_run(
        user=user,
        key="k-1",
        operation=OPERATION,
        surface=surface,
        body=body if body is not None else {"amount_micro": 1},
        action=action,
        answer=lambda result: (201, render_json({"made": result})),
    )


def _refused_code(call: Any) -> str:
    with pytest.raises(VouchError) as caught:
        call()
    return str(caught.value.code)


@pytest.mark.django_db
def test_a_new_key_makes_a_running_record_leased_for_its_provider_calls(
    user: User, budget: list[int]
) -> None:
    with time_machine.travel(START, tick=False):
        claim = _claim(user, provider_calls=2, body={"b": 1, "a": 2})
    assert (claim.replay, claim.resumed) == (False, False)
    record = IdempotencyRecord.objects.get()
    assert record.pk == claim.record.pk
    assert (record.user_id, record.key, record.operation, record.surface) == (
        user.pk,
        "k-1",
        OPERATION,
        SURFACE_REST,
    )
    assert record.request_digest == body_digest({"a": 2, "b": 1})
    assert record.running is True
    assert record.lease_until == START + timedelta(seconds=25)


@pytest.mark.django_db
def test_a_claim_stores_a_long_operation_name_within_its_column(user: User) -> None:
    long_name = "envelope.refund:" + "e" * 300
    _claim(user, operation=long_name)
    assert IdempotencyRecord.objects.get().operation == operation_bounded(long_name)
    with pytest.raises(IdempotencyKeyInUse):  # the same operation, found again: not a new one
        _claim(user, operation=long_name)
    assert IdempotencyRecord.objects.count() == 1


@pytest.mark.django_db
def test_a_finished_key_replays_its_answer_and_the_action_never_runs_again(
    user: User, budget: list[int]
) -> None:
    calls: list[int] = []

    def action(record: IdempotencyRecord) -> str:
        calls.append(record.pk)
        return "erf_1"

    assert _run(user, action) == "erf_1"
    record = IdempotencyRecord.objects.get()
    assert (record.running, record.response_status, record.response_body) == (
        False,
        201,
        '{"made":"erf_1"}',
    )
    again = _run(user, action)
    assert again == StoredAnswer(201, '{"made":"erf_1"}', replayed=True)
    assert calls == [record.pk]


@pytest.mark.django_db
def test_a_replay_of_an_answer_without_a_status_is_a_200(user: User) -> None:
    claim = _claim(user)
    IdempotencyRecord.objects.filter(pk=claim.record.pk).update(running=False, response_body="{}")
    assert _run(user, lambda record: "never") == StoredAnswer(200, "{}", True)


@pytest.mark.django_db
def test_an_invalid_key_is_refused_before_anything_is_recorded(user: User) -> None:
    with pytest.raises(InvalidIdempotencyKey):
        idempotent_run(
            user=user,
            key="",
            operation=OPERATION,
            surface=SURFACE_REST,
            body={},
            action=lambda record: "never",
            answer=lambda result: (200, "{}"),
        )
    assert not IdempotencyRecord.objects.exists()


@pytest.mark.django_db
def test_the_checks_run_in_order_in_use_other_surface_conflict_replay(
    user: User, budget: list[int]
) -> None:
    """SPEC §4: in use (409), other surface (422), conflict (422), replay."""
    with time_machine.travel(START, tick=False):
        _claim(user)  # running, leased for 17.5 s
    # While leased: in use, whatever the surface or the body.
    with time_machine.travel(START + timedelta(seconds=17), tick=False):
        assert _refused_code(lambda: _claim(user, surface=SURFACE_MCP, body={"x": 1})) == (
            "idempotency_key_in_use"
        )
    finished = IdempotencyRecord.objects.get()
    finished.running = False
    finished.response_status = 200
    finished.save()
    assert _refused_code(lambda: _claim(user, surface=SURFACE_MCP, body={"x": 1})) == (
        "idempotency_key_other_surface"
    )
    assert _refused_code(lambda: _claim(user, body={"x": 1})) == "idempotency_key_conflict"
    assert _claim(user).replay is True
    assert IdempotencyRecord.objects.count() == 1


def test_the_refusals_status_codes() -> None:
    assert (IdempotencyKeyInUse.code, IdempotencyKeyInUse.status_code) == (
        "idempotency_key_in_use",
        409,
    )
    assert (IdempotencyKeyConflict.code, IdempotencyKeyConflict.status_code) == (
        "idempotency_key_conflict",
        422,
    )
    assert (IdempotencyKeyOtherSurface.code, IdempotencyKeyOtherSurface.status_code) == (
        "idempotency_key_other_surface",
        422,
    )


@pytest.mark.django_db
def test_a_running_key_whose_lease_lapsed_is_resumed_and_leased_again(
    user: User, budget: list[int]
) -> None:
    with time_machine.travel(START, tick=False):
        _claim(user)
    lapsed = START + timedelta(seconds=17.5)  # the lease's very end: no longer held
    with time_machine.travel(lapsed, tick=False):
        claim = _claim(user, provider_calls=3)
    assert (claim.replay, claim.resumed) == (False, True)
    record = IdempotencyRecord.objects.get()
    assert record.lease_until == claim.record.lease_until == lapsed + timedelta(seconds=32.5)
    assert record.running is True


@pytest.mark.django_db
def test_a_resumed_key_on_the_other_surface_or_with_another_body_is_still_refused(
    user: User, budget: list[int]
) -> None:
    with time_machine.travel(START, tick=False):
        _claim(user)
    with time_machine.travel(START + timedelta(minutes=5), tick=False):
        assert _refused_code(lambda: _claim(user, surface=SURFACE_MCP)) == (
            "idempotency_key_other_surface"
        )
        assert _refused_code(lambda: _claim(user, body={"x": 1})) == "idempotency_key_conflict"


@pytest.mark.django_db
def test_a_key_is_scoped_to_its_user_and_its_operation(user: User) -> None:
    other = User.objects.create_user("max", "max@example.com", "pw-max-123")
    _claim(user)
    assert _claim(other).replay is False
    assert _claim(user, operation="envelope.refund:env_B").replay is False
    assert IdempotencyRecord.objects.count() == 3


@pytest.mark.django_db
def test_a_refusal_that_changed_nothing_frees_the_key_for_a_corrected_request(
    user: User,
) -> None:
    def refuse(record: IdempotencyRecord) -> str:
        raise Invalid()

    with pytest.raises(Invalid):
        _run(user, refuse)
    assert not IdempotencyRecord.objects.exists()
    assert _run(user, lambda record: "erf_2", body={"amount_micro": 2}) == "erf_2"


@pytest.mark.django_db
def test_a_refusal_that_ended_the_operation_is_kept_and_replayed(user: User) -> None:
    def decline(record: IdempotencyRecord) -> str:
        raise Declined("The card was declined.", details={"decline_code": "generic"})

    with pytest.raises(Declined):
        _run(user, decline)
    record = IdempotencyRecord.objects.get()
    body = render_json(
        error_body("test_declined", "The card was declined.", {"decline_code": "generic"})
    )
    assert (record.running, record.response_status, record.response_body) == (False, 402, body)
    assert _run(user, decline) == StoredAnswer(402, body, replayed=True)


@pytest.mark.django_db
def test_a_refusal_after_something_was_created_keeps_the_record_and_ends_its_lease(
    user: User, budget: list[int]
) -> None:
    def create_then_refuse(record: IdempotencyRecord) -> str:
        idempotency_attach(record, "erf_9")
        raise Invalid()

    with time_machine.travel(START, tick=False), pytest.raises(Invalid):
        _run(user, create_then_refuse)
    record = IdempotencyRecord.objects.get()
    assert (record.resource, record.running, record.lease_until) == ("erf_9", True, START)
    with time_machine.travel(START + timedelta(seconds=1), tick=False):
        assert _claim(user).resumed is True  # at once, not after the lease


@pytest.mark.django_db
def test_an_unexpected_error_ends_the_lease_so_a_retry_resumes_at_once(
    user: User, budget: list[int]
) -> None:
    def crash(record: IdempotencyRecord) -> str:
        raise RuntimeError("boom")

    with time_machine.travel(START, tick=False), pytest.raises(RuntimeError):
        _run(user, crash)
    record = IdempotencyRecord.objects.get()
    assert (record.running, record.lease_until) == (True, START)
    with time_machine.travel(START + timedelta(seconds=1), tick=False):
        assert _claim(user).resumed is True


@pytest.mark.django_db
def test_an_answer_recorded_by_another_observer_meanwhile_is_the_answer(user: User) -> None:
    """While the request ran, a provider event settled its operation: that stored answer is the
    truth about how it ended, sent as it is (not a replay)."""

    def settled_meanwhile(record: IdempotencyRecord) -> str:
        idempotency_attach(record, "fnd_1")
        assert idempotency_settle_error(resource="fnd_1", error=Declined("declined")) == 1
        raise Invalid()

    assert _run(user, settled_meanwhile) == StoredAnswer(
        402, render_json(error_body("test_declined", "declined", None)), replayed=False
    )
    assert IdempotencyRecord.objects.get().running is False


@pytest.mark.django_db
def test_settling_an_error_keeps_it_only_for_running_records_of_that_resource(
    user: User,
) -> None:
    mine = _claim(user).record
    idempotency_attach(mine, "fnd_1")
    other = _claim(user, key="k-2").record
    idempotency_attach(other, "fnd_2")
    finished = _claim(user, key="k-3").record
    idempotency_attach(finished, "fnd_1")
    idempotency_store(finished, status=201, body="{}")
    _claim(user, key="k-4")  # running, names nothing yet
    assert idempotency_settle_error(resource="fnd_1", error=Invalid()) == 0  # changed nothing
    assert idempotency_settle_error(resource="", error=Declined()) == 0  # names nothing
    assert idempotency_settle_error(resource="fnd_1", error=Declined()) == 1
    rows = {r.key: (r.running, r.response_status) for r in IdempotencyRecord.objects.all()}
    assert rows == {
        "k-1": (False, 402),
        "k-2": (True, None),
        "k-3": (False, 201),
        "k-4": (True, None),
    }


@pytest.mark.django_db
def test_attaching_names_the_resource_on_the_record_and_in_the_database(user: User) -> None:
    record = _claim(user).record
    idempotency_attach(record, "erf_5")
    assert record.resource == "erf_5"
    assert IdempotencyRecord.objects.get().resource == "erf_5"
    assert idempotency_attach_statements(None, "erf_5") == []
    idempotency_attach(None, "erf_6")  # no key was sent: nothing to name
    idempotency_attached(None, "erf_6")


@pytest.mark.django_db
def test_a_live_worker_renews_its_lease_and_a_finished_one_does_not(
    user: User, budget: list[int]
) -> None:
    with time_machine.travel(START, tick=False):
        record = _claim(user).record
    later = START + timedelta(seconds=60)
    with time_machine.travel(later, tick=False):
        idempotency_renew(record, provider_calls=2)
        idempotency_renew(None)
    assert record.lease_until == later + timedelta(seconds=25)
    assert IdempotencyRecord.objects.get().lease_until == later + timedelta(seconds=25)
    idempotency_store(record, status=200, body="{}")
    with time_machine.travel(later + timedelta(seconds=60), tick=False):
        idempotency_renew(record)
    assert IdempotencyRecord.objects.get().lease_until == later + timedelta(seconds=25)


@pytest.mark.django_db
def test_ending_a_lease_or_dropping_a_key_never_touches_a_finished_answer(user: User) -> None:
    record = _claim(user).record
    idempotency_store(record, status=201, body='{"a":1}')
    before = IdempotencyRecord.objects.get()
    idempotency_lease_end(record)
    idempotency_drop(record)
    after = IdempotencyRecord.objects.get()
    assert (after.lease_until, after.response_body) == (before.lease_until, '{"a":1}')


@pytest.mark.django_db
def test_pruning_removes_finished_keys_older_than_the_limit_only(user: User) -> None:
    old_done = _claim(user, key="old-done").record
    old_running = _claim(user, key="old-running").record
    young_done = _claim(user, key="young-done").record
    for record in (old_done, young_done):
        idempotency_store(record, status=200, body="{}")
    now = timezone.now()
    IdempotencyRecord.objects.filter(pk__in=[old_done.pk, old_running.pk]).update(
        created_at=now - timedelta(days=31)
    )
    IdempotencyRecord.objects.filter(pk=young_done.pk).update(created_at=now - timedelta(days=29))
    assert idempotency_prune(older_than_days=30) == 1
    assert sorted(IdempotencyRecord.objects.values_list("key", flat=True)) == [
        "old-running",
        "young-done",
    ]


def test_a_stored_answer_is_the_json_renderers_bytes() -> None:
    assert render_json({"b": 1.5, "a": None, "t": "é"}) == '{"b":1.5,"a":null,"t":"é"}'


class _Died(BaseException):
    """The process died at a crash point (os._exit, here caught so the test can look)."""


@pytest.mark.django_db
def test_a_process_that_dies_after_the_action_leaves_the_key_running_to_be_resumed(
    user: User, settings: Any, monkeypatch: pytest.MonkeyPatch, budget: list[int]
) -> None:
    """SPEC §3's crash point between the work and its stored answer: nothing is stored, the key
    stays leased, and after the lease the same key resumes what the record names."""

    def die(status: int) -> None:
        raise _Died(status)

    settings.VOUCH_CRASH_AT = "idempotent_before_store"
    monkeypatch.setattr(os, "_exit", die)

    def create(record: IdempotencyRecord) -> str:
        idempotency_attach(record, "erf_7")
        return "erf_7"

    with time_machine.travel(START, tick=False), pytest.raises(_Died):
        _run(user, create)
    record = IdempotencyRecord.objects.get()
    assert (record.running, record.response_status, record.resource) == (True, None, "erf_7")
    with time_machine.travel(START + timedelta(seconds=18), tick=False):
        claim = _claim(user)
    assert (claim.resumed, claim.record.resource) == (True, "erf_7")


def _vanishing(monkeypatch: pytest.MonkeyPatch, user: User, times: int) -> None:
    """Another request holds the key when this claim inserts its record, and drops it (its
    validation error) before this claim reads it: `times` times in a row."""
    real = db.execute
    left = [times]

    def execute(statements: Any) -> list[Any]:
        mine = IdempotencyRecord.objects.filter(user=user, key="k-1")
        if left[0] and not mine.exists():
            IdempotencyRecord.objects.create(
                user=user,
                key="k-1",
                operation=OPERATION,
                surface=SURFACE_REST,
                request_digest=body_digest({"other": 1}),
                lease_until=timezone.now() + timedelta(minutes=1),
            )
        result = real(statements)
        if left[0] and not result[0]:
            left[0] -= 1
            mine.delete()
        return result

    monkeypatch.setattr(db, "execute", execute)


@pytest.mark.django_db
def test_a_key_whose_record_was_dropped_meanwhile_is_claimed_anew(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    _vanishing(monkeypatch, user, times=1)
    claim = _claim(user)
    assert (claim.replay, claim.resumed) == (False, False)
    record = IdempotencyRecord.objects.get()
    assert (record.pk, record.request_digest) == (claim.record.pk, body_digest({"amount_micro": 1}))


@pytest.mark.django_db
def test_a_key_whose_record_keeps_vanishing_is_answered_in_use_after_two_tries(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim does not loop: twice dropped under it, it answers 409 and the client retries."""
    _vanishing(monkeypatch, user, times=2)
    with pytest.raises(IdempotencyKeyInUse):
        _claim(user)
    assert not IdempotencyRecord.objects.exists()
