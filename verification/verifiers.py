"""Verifiers read one channel afresh for one attempt. A small registry: another provider or
channel is a new class here, not an edit of the engine."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from django.db import connections
from django.db.models.fields.json import KT

from core.budget import budget_from_settings
from verification.contracts import Channel, Contract
from verification.expressions import Context, missing
from verification.models import ProviderEvent


@dataclass(frozen=True)
class Observed:
    data: dict[str, Any]


class Verifier(Protocol):
    name: ClassVar[str]

    def problems(self, *, contract: Contract, channel: Channel) -> list[str]:
        """What in the channel this verifier could never read, each `field: problem` with the
        field relative to the channel (checked at load, so a typo stops startup)."""
        ...

    def observe(
        self, *, contract: Contract, channel: Channel, context: Context, skew_s: float
    ) -> Observed: ...


class HttpVerifier:
    """A fresh provider readback through the adapter (never a local cache). Found: the parsed
    object. Not found or unreadable: {"found": false, "error": ...}, so paths into it do not
    resolve."""

    name: ClassVar[str] = "http"
    # provider -> resource -> the adapter's read operation: what a contract's `provider` and
    # `read.resource` may name.
    READERS: ClassVar[dict[str, dict[str, str]]] = {
        "stripe": {
            "charge": "charge_read",
            "dispute": "dispute_read",
            "payment_intent": "payment_intent_read",
            "refund": "refund_read",
        },
    }

    def __init__(self, provider: Any = None) -> None:
        self._provider = provider

    def provider(self) -> Any:
        """The given adapter, or the configured one (cached per configuration by the adapter)."""
        from providers import provider_from_settings

        return self._provider or provider_from_settings()

    def problems(self, *, contract: Contract, channel: Channel) -> list[str]:
        readable = self.READERS.get(contract.provider)
        if channel.read is None or readable is None:  # refused elsewhere, with its own message
            return []
        if channel.read.resource not in readable:
            return [
                f"read.resource: {contract.provider} has no readable resource "
                f"{channel.read.resource!r} (readable: {', '.join(sorted(readable))})"
            ]
        return []

    def observe(
        self, *, contract: Contract, channel: Channel, context: Context, skew_s: float
    ) -> Observed:
        if channel.read is None:  # the contract's validation refuses this
            raise LookupError(f"channel {channel.name} has no `read`")
        object_id = context.resolve(channel.read.id)
        if missing(object_id) or not isinstance(object_id, str):
            return Observed({"found": False, "error": f"{channel.read.id} does not resolve"})
        operation = self.READERS[contract.provider][channel.read.resource]
        # A readback: after money and people in Stripe's budgets, within verification's cap.
        outcome = getattr(self.provider(), operation)(
            object_id, budget=budget_from_settings("verification")
        )
        if outcome.accepted:
            return Observed(outcome.require())
        # Only `found` and `error`: no key that could shadow a field of the object (`status`).
        # A read not sent for want of room in Stripe's rate budgets (`budget_full`) is exactly a
        # read that got no answer: no path into it resolves, so it proves nothing either way and
        # the run is read again later; never a verdict from it.
        return Observed({"found": False, "error": outcome.error_code})


def dig(node: Any, dotted: str) -> Any:
    """The value at a dotted path into nested dicts (`data.object.id`), or None."""
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


class WebhookVerifier:
    """Stored provider events of the channel's types since the operation started that belong to
    the run: `{events, count, latest, earliest, types, duplicates_dropped}`. `count` counts
    distinct objects, not deliveries."""

    name: ClassVar[str] = "webhook"

    def problems(self, *, contract: Contract, channel: Channel) -> list[str]:
        return []

    def observe(
        self, *, contract: Contract, channel: Channel, context: Context, skew_s: float
    ) -> Observed:
        selection = channel.events
        if selection is None:  # the contract's validation refuses this
            raise LookupError(f"channel {channel.name} has no `events`")
        started = context.operation_created_at.timestamp()
        since = math.floor(started) - math.ceil(skew_s)
        rows = ProviderEvent.objects.filter(
            provider=contract.provider, type__in=selection.types, provider_created__gte=since
        ).only("event_id", "type", "provider_created", "payload", "duplicates")  # not `raw`
        if selection.scope is not None:
            scope_value = context.resolve(selection.scope.equals)
            path = f"payload__data__object__{selection.scope.field}"
            if isinstance(scope_value, str) and connections[rows.db].vendor == "postgresql":
                # As text, the form the object indexes hold (`event_object_charge`): a busy
                # charge's events are found by the index, not by reading every event of the type
                # since the operation began (27 ms a read in the rate-limits bench). The loop
                # below compares the object's own value again. (On SQLite, `make run`'s, Django
                # reads the compared text as JSON: "malformed JSON". There the JSON compare.)
                rows = rows.alias(scope_text=KT(path)).filter(scope_text=scope_value)
            elif not missing(scope_value):
                rows = rows.filter(**{path: scope_value})

        def value(path: str | None) -> Any:
            if path is None:
                return None
            resolved = context.resolve(path)
            return None if missing(resolved) else resolved

        resource, key = value(selection.resource), value(selection.idempotency_key)
        scope = value(selection.scope.equals) if selection.scope else None
        owner_value = value(selection.owner.equals) if selection.owner else None
        events: list[dict[str, Any]] = []
        objects: set[str] = set()
        duplicates = 0
        for row in rows.order_by("provider_created", "id"):
            obj = dig(row.payload, "data.object") or {}
            metadata = obj.get("metadata") or {}
            if selection.owner is not None:
                owner = metadata.get(selection.owner.metadata_key)
                if owner is not None and owner != owner_value:
                    continue  # another Vouch operation's object never belongs
            marked = bool(selection.marker_prefix) and any(
                str(k).startswith(str(selection.marker_prefix)) for k in metadata
            )
            belongs = (
                (resource is not None and obj.get("id") == resource)
                or (
                    selection.owner is not None
                    and owner_value is not None
                    and metadata.get(selection.owner.metadata_key) == owner_value
                )
                or (key is not None and dig(row.payload, "request.idempotency_key") == key)
                or (
                    selection.scope is not None
                    and scope is not None
                    and obj.get(selection.scope.field) == scope
                    and not marked
                )
            )
            if not belongs:
                continue
            duplicates += row.duplicates
            object_id = str(obj.get("id"))
            if object_id in objects:
                duplicates += 1
            objects.add(object_id)
            events.append(
                {
                    "id": row.event_id,
                    "type": row.type,
                    "object": object_id,
                    "created": row.provider_created,
                }
            )
        created = [e["created"] for e in events]
        return Observed(
            {
                "events": events,
                "count": len(objects),
                "latest": max(created) if created else None,
                "earliest": min(created) if created else None,
                "types": sorted({e["type"] for e in events}),
                "duplicates_dropped": duplicates,
            }
        )


REGISTRY: dict[str, Verifier] = {"http": HttpVerifier(), "webhook": WebhookVerifier()}

# The providers Vouch can verify against: those it can read back from.
PROVIDERS: frozenset[str] = frozenset(HttpVerifier.READERS)


def contract_problems(contract: Contract) -> list[str]:
    """Each `field: problem` where the contract names a provider, verifier or resource that no
    verifier can read. Empty for a contract every attempt can carry out."""
    if contract.provider not in PROVIDERS:
        return [
            f"provider: no provider {contract.provider!r} (known: {', '.join(sorted(PROVIDERS))})"
        ]
    problems: list[str] = []
    for index, channel in enumerate(contract.channels):
        verifier = REGISTRY.get(channel.verifier)
        if verifier is None:
            problems.append(
                f"channels.{index}.verifier: no verifier {channel.verifier!r} "
                f"(known: {', '.join(sorted(REGISTRY))})"
            )
            continue
        problems += [
            f"channels.{index}.{problem}"
            for problem in verifier.problems(contract=contract, channel=channel)
        ]
    return problems


def verifier_for(channel: Channel) -> Verifier:
    try:
        return REGISTRY[channel.verifier]
    except KeyError:
        raise LookupError(f"no verifier {channel.verifier!r}; known: {sorted(REGISTRY)}") from None
