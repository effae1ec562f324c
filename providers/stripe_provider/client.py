"""The Stripe adapter: `StripeProvider`, the narrow operations Vouch calls.

Every call goes through a configured `StripeClient` (key and base address from settings, so the
sandbox and real test mode are one setting apart), with connect and read timeouts. Transient
failures (network errors and timeouts, 5xx, 409, 429) are retried a bounded number of times with
jittered exponential backoff, always with the *same* idempotency key, honouring
`Stripe-Should-Retry` and `Retry-After`. Every call answers an `Outcome`: accepted, refused
(the provider definitely did not do it) or unknown.

Every attempt, retries included, first takes one slot of Stripe's global budget and one of its
endpoint's (`limits`, shared by every process through the database: core.budget), plus one of the
caller's lane (`budget=`, reads only), all at once and by priority: writes with an idempotency key
first, then a person's reads, then readbacks, then reconciliation
(docs/decisions/0018-one-budget-per-stripe-limit.md). A call that finds no room within its wait
(`core.budget.current_wait_s`) sends nothing and answers a not-sent outcome (`sent=False`,
`budget_full`). A 429 holds off the budgets it names for the wait the provider asked for. Lists
are streamed a page at a time (`list_pages`), each page with the body exactly as received."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any, cast

import stripe

from core.budget import CallBudget, current_wait_s
from core.timing import provider_wait
from providers.metrics import operation_of, provider_call_observe
from providers.outcomes import Outcome, OutcomeKind, ProviderUnavailable, WebhookSignatureError
from providers.stripe_provider.failures import RetryPolicy, classify
from providers.stripe_provider.limits import CallSlots, Limits, endpoint_of
from providers.stripe_provider.pages import (
    LIST_KINDS,
    Page,
    _Advance,
    _after_last,
    _collect,
    _next_search_page,
    _Request,
)
from providers.stripe_provider.transport import _RequestsClient

DEFAULT_API_BASE = "https://api.stripe.com"

# Stripe keeps an idempotency key 24 hours. Past this, repeating a write with its key could act
# again instead of replaying: callers look the object up instead.
IDEMPOTENCY_KEY_TTL = timedelta(hours=23)
# "Idempotency keys can be up to 255 characters long" (https://docs.stripe.com/api/idempotent_requests).
MAX_KEY_LENGTH = 255


class StripeProvider:
    """Narrow operations on Stripe. Amounts are in the provider's unit (cents): conversion from
    Vouch's micro-dollars happens at the caller's boundary, once."""

    def __init__(
        self,
        *,
        api_key: str,
        api_base: str = DEFAULT_API_BASE,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        limits: Limits | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        # Stripe's limits this adapter's calls take from (None: none, only a caller's lane).
        self.limits = limits
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._sleep = sleep
        self._client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base, "files": api_base},
            http_client=_RequestsClient(timeout=(connect_timeout_s, read_timeout_s)),
            max_network_retries=0,  # retries are ours: bounded, same key, typed outcome
        )

    @property
    def retry_budget_s(self) -> float:
        """The longest one operation can take, retries included: a lease on work that calls the
        provider must outlive it."""
        attempt = self.connect_timeout_s + self.read_timeout_s
        waits = max(self.retry.max_delay_s, self.retry.max_retry_after_s)
        return self.retry.max_attempts * attempt + (self.retry.max_attempts - 1) * waits

    # --- payments ----------------------------------------------------------------------------

    def payment_create(
        self,
        *,
        amount_cents: int,
        currency: str,
        payment_method: str,
        idempotency_key: str,
        metadata: dict[str, str],
        description: str | None = None,
    ) -> Outcome:
        """Create and confirm a PaymentIntent, server-side, with a card. Accepted: the PaymentIntent
        (status `succeeded`, `latest_charge` the charge id). A declined card is refused with
        Stripe's code and the decline detail (`decline_code`, `charge`, `payment_intent`).

        `allowed_payment_method_types: ["card"]`: `payment_method_types` is no longer writable at
        API 2026-09-30.endive (400 `payment_method_types_no_longer_supported`), and without a
        list Stripe's dynamic payment methods would allow redirect-based ones, whose confirmation
        needs a `return_url` Vouch's API cannot serve. `error_on_requires_action`: a card that
        asks for 3-D Secure needs the buyer in a browser with Stripe.js, which funding over the
        API does not have; Stripe then fails the attempt (`authentication_required`) instead of
        leaving a PaymentIntent waiting for an authentication that cannot come."""
        params: Any = {
            "amount": amount_cents,
            "currency": currency,
            "payment_method": payment_method,
            "confirm": True,
            "allowed_payment_method_types": ["card"],
            "error_on_requires_action": True,
            "metadata": metadata,
        }
        if description:
            params["description"] = description
        return self._call(
            lambda options: self._client.v1.payment_intents.create(params=params, options=options),
            idempotency_key=idempotency_key,
        )

    def payment_intent_read(
        self, payment_intent_id: str, *, budget: CallBudget | None = None
    ) -> Outcome:
        return self._call(
            lambda options: self._client.v1.payment_intents.retrieve(
                payment_intent_id, options=options
            ),
            budget=budget,
        )

    def payment_intents_with_metadata(
        self, key: str, value: str, *, budget: CallBudget | None = None
    ) -> Outcome:
        """The PaymentIntents whose `metadata[key]` is `value` (Stripe's Search API), newest first,
        every page: accepted with `{"data": [...]}`. For finding a payment whose answer was lost
        after its idempotency key expired, without ever creating one."""
        if "'" in key or "'" in value:
            raise ValueError("metadata search terms may not contain quotes")
        params = {"query": f"metadata['{key}']:'{value}'", "limit": 100}

        def search(params: Any) -> _Request:
            return lambda options: self._client.v1.payment_intents.search(
                params=params, options=options
            )

        return _collect(
            self._pages("payment_intents", search, params, budget=budget, advance=_next_search_page)
        )

    def payment_intent_pages_with_metadata(
        self, key: str, value: str, *, budget: CallBudget | None = None
    ) -> Iterator[Page]:
        """`payment_intents_with_metadata` page by page, each `Page` with the body as received
        (for a read that is stored with its SHA-256). A page that cannot be read raises
        `ProviderUnavailable`."""
        if "'" in key or "'" in value:
            raise ValueError("metadata search terms may not contain quotes")
        params = {"query": f"metadata['{key}']:'{value}'", "limit": 100}

        def search(params: Any) -> _Request:
            return lambda options: self._client.v1.payment_intents.search(
                params=params, options=options
            )

        return self._pages(
            "payment_intents", search, params, budget=budget, advance=_next_search_page
        )

    def charge_read(self, charge_id: str, *, budget: CallBudget | None = None) -> Outcome:
        return self._call(
            lambda options: self._client.v1.charges.retrieve(charge_id, options=options),
            budget=budget,
        )

    # --- refunds -----------------------------------------------------------------------------

    def refund_create(
        self,
        *,
        charge: str,
        amount_cents: int,
        idempotency_key: str,
        metadata: dict[str, str],
        reason: str | None = None,
    ) -> Outcome:
        params: Any = {"charge": charge, "amount": amount_cents, "metadata": metadata}
        if reason:
            params["reason"] = reason
        return self._call(
            lambda options: self._client.v1.refunds.create(params=params, options=options),
            idempotency_key=idempotency_key,
        )

    def refund_read(self, refund_id: str, *, budget: CallBudget | None = None) -> Outcome:
        return self._call(
            lambda options: self._client.v1.refunds.retrieve(refund_id, options=options),
            budget=budget,
        )

    def refunds_of_charge(
        self, charge: str, *, page_size: int = 100, budget: CallBudget | None = None
    ) -> Outcome:
        """Every refund of a charge, newest first, all pages: accepted with `{"data": [...]}`."""
        params = {"charge": charge, "limit": page_size}

        def list_page(params: Any) -> _Request:
            return lambda options: self._client.v1.refunds.list(params=params, options=options)

        return _collect(self._pages("refunds", list_page, params, budget=budget))

    def refund_pages_of_charge(
        self, charge: str, *, page_size: int = 100, budget: CallBudget | None = None
    ) -> Iterator[Page]:
        """`refunds_of_charge` page by page, each `Page` with the body as received (for a read
        that is stored with its SHA-256). A page that cannot be read (a charge the provider does
        not hold: refused, 404) raises `ProviderUnavailable`."""
        params = {"charge": charge, "limit": page_size}

        def list_page(params: Any) -> _Request:
            return lambda options: self._client.v1.refunds.list(params=params, options=options)

        return self._pages("refunds", list_page, params, budget=budget)

    # --- disputes ----------------------------------------------------------------------------

    def dispute_read(self, dispute_id: str, *, budget: CallBudget | None = None) -> Outcome:
        return self._call(
            lambda options: self._client.v1.disputes.retrieve(dispute_id, options=options),
            budget=budget,
        )

    def dispute_submit_manually(self, *, dispute_id: str, idempotency_key: str) -> Outcome:
        """Tell Stripe that this dispute's evidence is submitted by hand (by Vouch, once a person
        approved it), so Smart Disputes never submits on its own. Stages nothing, submits nothing
        (`submit=false`, stated explicitly: Stripe's default is true)."""
        params: Any = {"intended_submission_method": "manual", "submit": False}
        return self._call(
            lambda options: self._client.v1.disputes.update(
                dispute_id, params=params, options=options
            ),
            idempotency_key=idempotency_key,
        )

    def dispute_file(
        self,
        *,
        dispute_id: str,
        evidence: dict[str, str],
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> Outcome:
        """Send evidence and submit it (`submit=true`, stated explicitly: Stripe's default)."""
        params: Any = {"evidence": evidence, "metadata": metadata, "submit": True}
        return self._call(
            lambda options: self._client.v1.disputes.update(
                dispute_id, params=params, options=options
            ),
            idempotency_key=idempotency_key,
        )

    def file_upload(self, *, filename: str, content: bytes, idempotency_key: str) -> Outcome:
        """Upload one dispute evidence file to Stripe's Files API (`purpose=dispute_evidence`,
        multipart, to the `files` base address: the sandbox's own address when it stands in).
        Accepted: the File object (`id` is what a dispute's file field takes). A retry sends the
        same bytes with the same key, so the provider replays one file, never makes two."""

        def upload(options: stripe.RequestOptions) -> Any:
            handle = io.BytesIO(content)  # a fresh handle for every attempt
            handle.name = filename  # the SDK sends it as the part's filename
            params: Any = {"purpose": "dispute_evidence", "file": handle}
            return self._client.v1.files.create(params=params, options=options)

        return self._call(upload, idempotency_key=idempotency_key)

    # --- lists --------------------------------------------------------------------------------

    def list_pages(
        self,
        kind: str,
        *,
        created_gte: int | None = None,
        created_lt: int | None = None,
        types: Sequence[str] | None = None,
        starting_after: str | None = None,
        limit: int = 100,
        budget: CallBudget | None = None,
    ) -> Iterator[Page]:
        """Stream a list (`kind`: refunds, charges, disputes, events), newest first, one `Page` per
        provider page, following `has_more` from the last object's id. Lazy: a page is read when
        the caller asks for it, and only one is held at a time. `created_gte`/`created_lt` send
        `created[gte]`/`created[lt]`; `types` (events only) sends Stripe's `types[]`;
        `starting_after` resumes after an object. A page that cannot be read after the retry
        policy raises `ProviderUnavailable`: a list never ends early in silence."""
        if kind not in LIST_KINDS:
            raise ValueError(f"cannot list {kind!r} (listable: {', '.join(sorted(LIST_KINDS))})")
        if types is not None and kind != "events":
            raise ValueError("types selects events; it is not a filter of " + kind)
        if isinstance(types, str):
            raise ValueError("types is a sequence of event types, not one string")
        if not 1 <= limit <= 100:
            raise ValueError(f"limit is 1 to 100, not {limit}")
        params: dict[str, Any] = {"limit": limit}
        created = {
            op: bound
            for op, bound in (("gte", created_gte), ("lt", created_lt))
            if bound is not None
        }
        if created:
            params["created"] = created
        if types is not None:
            params["types"] = list(types)
        if starting_after:
            params["starting_after"] = starting_after
        path = f"/v1/{kind}"

        def list_page(params: Any) -> _Request:
            # A raw request: the page's JSON parsed once, never turned into the SDK's objects
            # (which cost six times the rest of a page of 100 charges).
            return lambda options: self._client.raw_request("get", path, **params, **options)

        return self._pages(kind, list_page, params, budget=budget)

    def _pages(
        self,
        kind: str,
        request_for: Callable[[dict[str, Any]], _Request],
        params: dict[str, Any],
        *,
        budget: CallBudget | None,
        advance: _Advance = _after_last,
    ) -> Iterator[Page]:
        """The one paging loop: read a page, yield it, go on from it (`advance`). Each operation
        makes its own requests (`request_for(params)`), so a request still names the operation
        that made it (its qualified name), as every other call's does."""
        following: dict[str, Any] | None = params
        while following is not None:
            sent = following
            outcome = self._call(request_for(sent), budget=budget, kind=kind)
            if not outcome.accepted:
                raise ProviderUnavailable(kind=kind, params=sent, outcome=outcome)
            answer = outcome.require()
            data = answer["data"]
            page = Page(
                kind=kind,
                params=sent,
                data=data,
                has_more=bool(answer.get("has_more")),
                body=outcome.body or b"",
                attempts=outcome.attempts,
                last_id=data[-1]["id"] if data else None,
            )
            following = advance(sent, answer)
            # Hold nothing of this page once the caller has it: the next read starts clean.
            del outcome, answer, data
            yield page
            del page

    # --- webhooks ----------------------------------------------------------------------------

    @staticmethod
    def webhook_verify(
        payload: bytes,
        signature_header: str,
        secrets: Sequence[str],
        *,
        tolerance_s: int = 300,
        now: float | None = None,
    ) -> dict[str, Any]:
        """Verify Stripe's `Stripe-Signature` (t=..,v1=..,v1=..) over `"{t}.{payload}"` with any of
        `secrets` (rotation), in constant time, within `tolerance_s` of `now` (the caller's clock).
        Returns the parsed event; raises WebhookSignatureError otherwise, whatever the header
        holds (anyone can send one: a timestamp too long for a float is refused, not a 500)."""
        timestamp: int | None = None
        signatures: list[str] = []
        for item in signature_header.split(","):
            name, _, value = item.strip().partition("=")
            if name == "t":
                # ASCII digits only (str.isdigit() takes "²", which int() refuses), and few enough
                # for a float: 12 digits reach past the year 30000.
                if not (value.isascii() and value.isdigit() and len(value) <= 12):
                    raise WebhookSignatureError("the signature's timestamp is not a Unix time")
                timestamp = int(value)
            elif name == "v1" and value.isascii() and value:
                # hmac.compare_digest refuses a non-ASCII str (TypeError): a header's bytes come
                # as Latin-1 characters, and no hex digest holds one, so such a v1 matches nothing.
                signatures.append(value)
        if timestamp is None or not signatures:
            raise WebhookSignatureError(
                "the Stripe-Signature header has no timestamp or no v1 signature"
            )
        current = time.time() if now is None else now
        if not abs(current - timestamp) <= tolerance_s:  # a NaN `now` is outside too
            raise WebhookSignatureError(
                f"the signature's timestamp is outside the {tolerance_s} s tolerance"
            )
        signed = f"{timestamp}.".encode() + payload
        expected = [hmac.new(s.encode(), signed, hashlib.sha256).hexdigest() for s in secrets if s]
        if not any(hmac.compare_digest(e, given) for e in expected for given in signatures):
            raise WebhookSignatureError("no signature matches a configured secret")
        try:
            event = json.loads(payload)
        except ValueError as exc:
            raise WebhookSignatureError("the payload is not JSON") from exc
        if not isinstance(event, dict) or "id" not in event or "type" not in event:
            raise WebhookSignatureError("the payload is not a Stripe event")
        return event

    # --- the retry loop ----------------------------------------------------------------------

    def _call(
        self,
        request: _Request,
        *,
        idempotency_key: str | None = None,
        budget: CallBudget | None = None,
        kind: str | None = None,
    ) -> Outcome:
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= MAX_KEY_LENGTH:
            # Stripe refuses such a key (400 idempotency_error) and does nothing: a key is
            # derived from our rows, so one this long is a programming error, never sent.
            raise ValueError(f"an idempotency key is 1 to {MAX_KEY_LENGTH} characters")
        if budget is not None and idempotency_key is not None:
            # A write that moves money takes from Stripe's limits ahead of every read, never
            # from a lane of reads.
            raise ValueError(
                "a write (one with an idempotency key) never draws on a call budget of a lane"
            )
        operation = operation_of(request)
        slots = CallSlots.of(
            endpoint=endpoint_of(operation, kind),
            limits=self.limits,
            lane=budget,
            writes=idempotency_key is not None,
        )
        started = time.perf_counter()
        outcome_kind, attempts = "error", 1
        try:
            outcome = self._attempts(request, idempotency_key=idempotency_key, slots=slots)
            outcome_kind = "not_sent" if outcome.not_sent else outcome.kind.value
            attempts = outcome.attempts
            return outcome
        finally:
            provider_call_observe(
                operation=operation,
                outcome=outcome_kind,
                attempts=attempts,
                seconds=time.perf_counter() - started,
            )

    def _attempts(
        self, request: _Request, *, idempotency_key: str | None, slots: CallSlots
    ) -> Outcome:
        """Make the request until it is answered or not worth retrying: the call's outcome."""
        options: stripe.RequestOptions = {}
        if idempotency_key is not None:
            options["idempotency_key"] = idempotency_key
        attempt = 0
        last: Outcome | None = None  # the previous attempt's, while retrying
        while True:
            if not slots.take():
                # No room within the wait: this attempt is not sent. A retry's earlier attempt
                # was, so its outcome stands (unknown: it may have been applied).
                return last or Outcome(
                    OutcomeKind.UNKNOWN,
                    error_code="budget_full",
                    error_message=(
                        f"not sent: Stripe's rate budget for {slots.endpoint} had no room within "
                        f"{current_wait_s():g} s"
                    ),
                    attempts=0,
                    idempotency_key=idempotency_key,
                    sent=False,
                )
            attempt += 1
            try:
                with provider_wait():
                    obj = request(options)
            except stripe.StripeError as exc:
                failure = classify(exc)
                headers = exc.headers or {}
                # Stripe keeps the answer of a request whose endpoint began executing under its
                # key, a 500 included, and replays it to every retry
                # (https://docs.stripe.com/api/idempotent_requests): sending again cannot tell
                # more. The caller reads the provider instead.
                replayed = headers.get("Idempotent-Replayed") == "true"
                delay = None if replayed else self._delay(attempt, failure.retry_after_s)
                if failure.code == "rate_limit":
                    # The limit is the account's: every process sharing the budget holds off.
                    slots.penalize(
                        headers.get("Stripe-Rate-Limited-Reason"),
                        failure.retry_after_s if failure.retry_after_s is not None else 1.0,
                    )
                error = getattr(exc, "error", None)
                outcome = Outcome(
                    failure.kind,
                    error_code=failure.code,
                    error_message=exc.user_message or str(exc),
                    http_status=exc.http_status,
                    error_detail=error.to_dict() if error is not None else {},
                    attempts=attempt,
                    replayed=replayed,
                    request_id=exc.request_id,
                    idempotency_key=idempotency_key,
                )
                if failure.retry and attempt < self.retry.max_attempts and delay is not None:
                    with provider_wait():  # backing off is waiting for the provider too
                        self._sleep(delay)
                    last = outcome
                    continue
                return outcome
            # A raw request answers the response itself; an SDK call, an object carrying it.
            response = obj if isinstance(obj, stripe.StripeResponse) else obj.last_response
            # The JSON as the provider sent it (already parsed), not a copy of the SDK's objects.
            value = cast("dict[str, Any]", response.data if response is not None else obj.to_dict())
            return Outcome(
                OutcomeKind.ACCEPTED,
                value,
                http_status=response.code if response else None,
                attempts=attempt,
                replayed=bool(response and response.headers.get("Idempotent-Replayed") == "true"),
                request_id=response.request_id if response else None,
                idempotency_key=idempotency_key,
                body=response.body.encode("utf-8") if response is not None else None,
            )

    def _delay(self, attempt: int, retry_after_s: float | None) -> float | None:
        """How long to wait before attempt `attempt + 1`; None: longer than we wait for."""
        if retry_after_s is not None:
            return retry_after_s if retry_after_s <= self.retry.max_retry_after_s else None
        backoff = min(self.retry.base_delay_s * 2 ** (attempt - 1), self.retry.max_delay_s)
        return backoff * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not secrecy
