"""What the control API does to the world behind Stripe's back, for reconciliation tests and
benchmarks: forget an object, tamper with one, seed many at once. None of it emits an event or
touches another object than the one named."""

from __future__ import annotations

from typing import Any

from stripe_sandbox import objects, resources
from stripe_sandbox.errors import StripeError
from stripe_sandbox.resources import dispute_funds
from stripe_sandbox.state import State


def sandbox_error(message: str, status: int = 400) -> StripeError:
    return StripeError(status, message, type="sandbox_error", stored=False)


def _existing(state: State, object_id: str) -> dict[str, Any]:
    obj = state.find(object_id)
    if obj is None:
        raise sandbox_error(f"No such object: {object_id}", 404)
    return obj


def _unlist(index: dict[str, list[str]], key: str, object_id: str) -> None:
    ids = index.get(key)
    if ids is not None and object_id in ids:
        ids.remove(object_id)


# --- forget ------------------------------------------------------------------------------------


def forget(state: State, object_id: str) -> dict[str, Any]:
    """The object vanishes from the provider: retrieve answers 404, lists and indexes no longer
    hold it. Nothing else changes: a charge keeps the `amount_refunded` a forgotten refund counted
    in (a refund Vouch recorded that the provider does not hold), a forgotten charge's refunds
    and disputes stay, still naming it."""
    obj = _existing(state, object_id)
    kind = obj["object"]
    world = state.world
    del state.table(kind)[object_id]
    world.timelines[kind].remove(object_id)
    world.born.pop(object_id, None)
    if kind == "refund":
        _unlist(world.refunds_by_charge, obj["charge"], object_id)
        # Its amount stays counted on the charge; it can no longer fail and give it back.
        world.refund_counted.pop(object_id, None)
    elif kind == "dispute":
        _unlist(world.disputes_by_charge, obj["charge"], object_id)
    elif kind == "charge":
        _unlist(world.charges_by_pi, obj["payment_intent"], object_id)
    elif kind == "file":
        world.file_contents.pop(object_id, None)
    return {"forgotten": object_id, "object": kind}


# --- tamper ------------------------------------------------------------------------------------

# Fields the sandbox renders from other objects rather than stores: tamper with those instead.
_RENDERED = {("charge", "refunds")}
# Fields an index follows: (kind, field) -> the World index keyed by that field's value.
_INDEXED = {
    ("refund", "charge"): "refunds_by_charge",
    ("dispute", "charge"): "disputes_by_charge",
    ("charge", "payment_intent"): "charges_by_pi",
}


def tamper(state: State, object_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Overwrite top-level fields of the stored object, as a provider-side change Vouch never
    heard of: no event, no other object touched (a refund's amount or status changed leaves its
    charge's `amount_refunded` alone; a charge's `amount_refunded` set stays until one of its
    refunds changes for real). Lists and indexes follow `created`, a refund's or dispute's
    `charge` and a charge's `payment_intent`."""
    obj = _existing(state, object_id)
    kind = obj["object"]
    for name, value in fields.items():
        if name in ("id", "object"):
            if value != obj[name]:
                raise sandbox_error(f"{name} cannot be changed")
        elif (kind, name) in _RENDERED:
            raise sandbox_error(f"a {kind}'s {name} are rendered from those objects: tamper there")
        elif name not in obj:
            raise sandbox_error(f"a {kind} has no field {name}")
        elif name == "created" and (isinstance(value, bool) or not isinstance(value, int)):
            raise sandbox_error("created must be an integer (seconds since the epoch)")
        elif (kind, name) in _INDEXED and not isinstance(value, str):
            raise sandbox_error(f"{name} must be an id (a string)")
    for name, value in fields.items():
        if name == "created" and value != obj["created"]:
            state.world.timelines[kind].move(object_id, value)
        index_name = _INDEXED.get((kind, name))
        if index_name is not None and value != obj[name]:
            index: dict[str, list[str]] = getattr(state.world, index_name)
            _unlist(index, obj[name], object_id)
            index.setdefault(value, []).append(object_id)
        obj[name] = value
    state.world.tampered.add(object_id)
    return state.render(obj)


# --- seed --------------------------------------------------------------------------------------

_SEED_CHARGE = {"amount", "currency", "metadata", "description", "payment_method", "created"}
_SEED_CHARGE_LISTS = {"refunds", "disputes"}
_SEED_REFUND = {"amount", "metadata", "reason", "status", "failure_reason", "created"}
_SEED_DISPUTE = {"amount", "reason", "status", "created"}
_REFUND_STATUSES = {"pending", "requires_action", "succeeded", "failed", "canceled"}
MAX_SEED_CHARGES = 100_000
# The test cards whose charges simply succeed (a dispute is seeded by `disputes`).
_SEED_CARDS = {
    k for k, card in objects.TEST_CARDS.items() if not card.error_code and not card.disputes
}


def _check_fields(where: str, item: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise sandbox_error(f"{where} must be an object")
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise sandbox_error(f"{where} has unknown fields {unknown}")
    return item


def _int(where: str, item: dict[str, Any], name: str, minimum: int, maximum: int) -> int | None:
    value = item.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise sandbox_error(f"{where}.{name} must be an integer from {minimum} to {maximum}")
    return value


def _metadata(where: str, item: dict[str, Any]) -> dict[str, str]:
    value = item.get("metadata") or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise sandbox_error(f"{where}.metadata must map strings to strings")
    return dict(value)


def _choice(where: str, item: dict[str, Any], name: str, choices: Any, default: Any) -> Any:
    value = item.get(name, default)
    if value is not None and value not in choices:
        raise sandbox_error(f"{where}.{name} must be one of {sorted(choices)}")
    return value


_EPOCH_MAX = 2**40


def seed(state: State, base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """Many succeeded charges (each with its PaymentIntent), their refunds and disputes, made
    directly: no events, no webhooks, no idempotency keys, but every object exactly as the API
    would have made it (the same constructors; `amount_refunded` and `refunded` from the
    refunds; the balance transactions of the charges, refunds, refund failures and disputes).
    `created` is the sandbox clock's, or each charge's own; its refunds and disputes default to
    the charge's. Everything is checked before anything is made."""
    _check_fields("the body", body, {"charges"})
    charges = body.get("charges")
    if not isinstance(charges, list) or len(charges) > MAX_SEED_CHARGES:
        raise sandbox_error(f"charges must be a list of at most {MAX_SEED_CHARGES} charges")
    now = state.clock.now_int()
    plans = [_plan_charge(f"charges[{i}]", item, now) for i, item in enumerate(charges)]
    return {"charges": [_make_charge(state, base_url, plan) for plan in plans]}


def _plan_charge(where: str, item: Any, now: int) -> dict[str, Any]:
    item = _check_fields(where, item, _SEED_CHARGE | _SEED_CHARGE_LISTS)
    amount = _int(where, item, "amount", resources.MIN_CHARGE, resources.MAX_CHARGE)
    if amount is None:
        raise sandbox_error(f"{where}.amount is required")
    currency = item.get("currency", "usd")
    if not isinstance(currency, str) or len(currency) != 3 or not currency.isalpha():
        raise sandbox_error(f"{where}.currency must be a three-letter code")
    payment_method = _choice(where, item, "payment_method", _SEED_CARDS, "pm_card_visa")
    description = item.get("description")
    if description is not None and not isinstance(description, str):
        raise sandbox_error(f"{where}.description must be a string")
    created = _int(where, item, "created", 0, _EPOCH_MAX)
    created = now if created is None else created
    refunds, live = [], 0
    for i, refund in enumerate(_list(where, item, "refunds")):
        at = f"{where}.refunds[{i}]"
        refund = _check_fields(at, refund, _SEED_REFUND)
        refund_amount = _int(at, refund, "amount", 1, amount)
        if refund_amount is None:
            raise sandbox_error(f"{at}.amount is required")
        status = _choice(at, refund, "status", _REFUND_STATUSES, "succeeded")
        if status not in ("failed", "canceled"):
            live += refund_amount
        failure_reason = _choice(
            at, refund, "failure_reason", resources.REFUND_FAILURE_REASONS, None
        )
        refund_created = _int(at, refund, "created", 0, _EPOCH_MAX)
        refunds.append(
            {
                "amount": refund_amount,
                "metadata": _metadata(at, refund),
                "reason": _choice(at, refund, "reason", resources.REFUND_REASONS, None),
                "status": status,
                "failure_reason": failure_reason,
                "created": created if refund_created is None else refund_created,
            }
        )
    if live > amount:
        raise sandbox_error(
            f"{where}: its refunds that are not failed or canceled hold {live}, more than the "
            f"charge's {amount}"
        )
    disputes = []
    for i, dispute in enumerate(_list(where, item, "disputes")):
        at = f"{where}.disputes[{i}]"
        dispute = _check_fields(at, dispute, _SEED_DISPUTE)
        dispute_amount = _int(at, dispute, "amount", 1, amount)
        dispute_created = _int(at, dispute, "created", 0, _EPOCH_MAX)
        disputes.append(
            {
                "amount": amount if dispute_amount is None else dispute_amount,
                "reason": _choice(at, dispute, "reason", objects.DISPUTE_REASONS, "general"),
                "status": _choice(
                    at, dispute, "status", objects.DISPUTE_STATUSES, "needs_response"
                ),
                "created": created if dispute_created is None else dispute_created,
            }
        )
    return {
        "amount": amount,
        "currency": currency.lower(),
        "metadata": _metadata(where, item),
        "description": description,
        "payment_method": payment_method,
        "created": created,
        "refunds": refunds,
        "disputes": disputes,
    }


def _list(where: str, item: dict[str, Any], name: str) -> list[Any]:
    value = item.get(name) or []
    if not isinstance(value, list):
        raise sandbox_error(f"{where}.{name} must be a list")
    return value


def _make_charge(state: State, base_url: str, plan: dict[str, Any]) -> dict[str, Any]:
    """One planned charge made as _confirm makes it, then its refunds and disputes."""
    pi = objects.payment_intent(
        amount=plan["amount"],
        currency=plan["currency"],
        created=plan["created"],
        payment_method=plan["payment_method"],
        metadata=plan["metadata"],
        description=plan["description"],
        receipt_email=None,
        payment_method_types=["card"],
        allowed_payment_method_types=["card"],
        automatic_payment_methods=None,
    )
    card = objects.TEST_CARDS[plan["payment_method"]]
    charge = objects.charge(pi=pi, card=card, created=plan["created"], base_url=base_url)
    pi["status"] = "succeeded"
    pi["amount_received"] = pi["amount"]
    pi["latest_charge"] = charge["id"]
    state.store(pi)
    state.store(charge)
    resources.charge_book(state, charge)
    state.world.charges_by_pi.setdefault(pi["id"], []).append(charge["id"])
    refund_ids = []
    for planned in plan["refunds"]:
        refund = objects.refund(
            charge=charge,
            amount=planned["amount"],
            reason=planned["reason"],
            metadata=planned["metadata"],
            created=planned["created"],
        )
        if planned["status"] != "succeeded":
            resources.refund_status_fields(refund, planned["status"], planned["failure_reason"])
        state.refund_added(refund)
        resources.refund_book(state, refund)
        if planned["status"] == "failed":
            resources.refund_failure_book(state, refund, created=planned["created"])
        refund_ids.append(refund["id"])
    dispute_ids = []
    for planned in plan["disputes"]:
        dispute = objects.dispute(
            charge=charge,
            amount=planned["amount"],
            reason=planned["reason"],
            created=planned["created"],
            due_by=planned["created"] + resources.DISPUTE_DUE_S,
            network_reason_code=objects.default_network_reason_code(
                charge["payment_method_details"]["card"]["brand"], planned["reason"]
            ),
            case_type="inquiry" if planned["status"] in objects.INQUIRY_STATUSES else None,
        )
        dispute["status"] = planned["status"]
        if planned["status"] in objects.DISPUTE_APPEAL_STAGES:  # as an appeal opened leaves it
            dispute["evidence"]["appeal"] = {"reason_for_filing": None, "supporting_files": []}
            dispute["evidence_details"]["appeal_eligible"] = True
        state.store(dispute)
        state.world.disputes_by_charge.setdefault(charge["id"], []).append(dispute["id"])
        charge["disputed"] = True
        # The money it moved, as dispute_open and a move to `won` move it (an inquiry: none).
        if dispute["payment_method_details"]["card"]["case_type"] != "inquiry":
            dispute_funds.funds_withdraw(state, dispute)
            if planned["status"] == "won":
                dispute_funds.funds_reinstate(state, dispute)
        dispute_funds.dispute_refresh(state, dispute)
        dispute_ids.append(dispute["id"])
    state.sync_charge_refunds(charge)
    return {
        "id": charge["id"],
        "payment_intent": pi["id"],
        "refunds": refund_ids,
        "disputes": dispute_ids,
    }
