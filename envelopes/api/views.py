"""The envelope endpoints of SPEC §2. Views parse, authorize, call one service, render."""

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.permissions import EmailVerified
from accounts.exceptions import EmailUnverified
from core import exceptions as core_errors
from core.api.idempotent import idempotent, operation_name
from core.api.parsing import (
    MICRO,
    Strict,
    StrictCharField,
    page_params,
    parse_body,
    path_id,
)
from core.api.permissions import SessionRequired, caller, django_permission
from core.api.responses import error_responses, ok, success_envelope
from core.api.schema import IDEMPOTENCY_KEY_HEADER, PAGE_PARAMETERS
from core.api.throttling import MONEY_MOVING
from core.idempotency import (
    IdempotencyKeyConflict,
    IdempotencyKeyInUse,
    IdempotencyKeyOtherSurface,
    InvalidIdempotencyKey,
)
from core.models import IdempotencyRecord
from core.request_facts import request_facts
from envelopes import selectors, services
from envelopes.api import schemas
from envelopes.exceptions import (
    AmountExceedsUnspent,
    CardDeclined,
    InvalidAmount,
    InvalidPaymentMethod,
    NothingToRefund,
    PaymentRefused,
    ProviderUnavailable,
    UnsupportedCurrency,
)

IDEMPOTENCY_HEADER = IDEMPOTENCY_KEY_HEADER  # one definition, with its rules: core/api/schema.py
AUTH_ERRORS = (core_errors.NotAuthenticated, core_errors.AuthenticationFailed)
# What a funding request (creation or top-up) can be refused with.
FUNDING_ERRORS = (
    InvalidAmount,
    UnsupportedCurrency,
    core_errors.InvalidInput,
    CardDeclined,
    ProviderUnavailable,
    InvalidPaymentMethod,
    PaymentRefused,
)
IDEMPOTENCY_ERRORS = (
    InvalidIdempotencyKey,
    IdempotencyKeyInUse,
    IdempotencyKeyConflict,
    IdempotencyKeyOtherSurface,
)


class FundingInput(Strict):
    amount_micro = schemas.FundingMicroField()
    payment_method = StrictCharField(max_length=100, help_text="e.g. pm_card_visa")
    currency = schemas.FundingCurrencyField(
        required=False, max_length=10, help_text="usd (the only one)"
    )


class DebitInput(Strict):
    amount_micro = schemas.PositiveMicroField(
        help_text=MICRO + " At most the unspent balance, else 422 `amount_exceeds_unspent`."
    )
    reference = StrictCharField(max_length=200, help_text="e.g. the claim or job id")


class RefundInput(Strict):
    """An empty body (no body at all) or `{}` asks for the whole unspent balance: every unspent
    micro-dollar is refunded, and the answer's `requested` is `whole_unspent`. Give `amount_micro`
    to refund less (issue 38, item 6: the documented contract, said where a client meets it)."""

    amount_micro = schemas.RefundMicroField(
        required=False,
        help_text=MICRO + " Omit for the whole unspent balance. At least 10,000 (one cent), else "
        "400 `invalid_amount`; at most the unspent balance, else 422 `amount_exceeds_unspent`. "
        "Each leg rounds down to a whole cent: the sub-cent rest stays in the envelope.",
    )


def _parse(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """Strict parsing; a bad `amount_micro` is `invalid_amount` (SPEC §1)."""
    try:
        return parse_body(serializer_class, request)
    except core_errors.InvalidInput as exc:
        if (
            "amount_micro" in exc.details
            and isinstance(request.data, dict)
            and ("amount_micro" in request.data)
        ):
            raise InvalidAmount(
                "amount_micro must be an integer number of micro-dollars.", details=exc.details
            ) from exc
        raise


def _funding_response(result: services.FundingResult, created: bool) -> Response:
    status = 202 if result.pending else (201 if created else 200)
    return ok(selectors.envelope_data(result.envelope), status=status)


class EnvelopeListCreateApi(APIView):
    permission_classes = [IsAuthenticated, SessionRequired, EmailVerified]
    throttle_classes = MONEY_MOVING

    @extend_schema(
        operation_id="envelopes_list",
        summary="The caller's envelopes",
        parameters=PAGE_PARAMETERS,
        responses={
            200: success_envelope(schemas.EnvelopeListOut, name="EnvelopeListEnvelope"),
            **error_responses(core_errors.InvalidInput, *AUTH_ERRORS),
        },
    )
    def get(self, request: Request) -> Response:
        limit, offset = page_params(request)
        envelopes = selectors.envelopes_of(user=caller(request))
        page = list(envelopes[offset : offset + limit])
        total = envelopes.count()
        return ok(
            {
                "results": [selectors.envelope_data(e, detail=False) for e in page],
                "count": total,
                "next_offset": offset + limit if offset + limit < total else None,
            }
        )

    @extend_schema(
        operation_id="envelopes_create",
        summary="Create and fund an envelope",
        description="Creates and confirms a PaymentIntent for the original charge. 201 funded; 202 "
        "when the provider's answer is unknown (a pending leg, resolved by a scheduled job).",
        request=FundingInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: success_envelope(schemas.EnvelopeOut, name="EnvelopeCreatedEnvelope"),
            202: success_envelope(schemas.EnvelopeOut, name="EnvelopePendingEnvelope"),
            **error_responses(
                *FUNDING_ERRORS,
                core_errors.SessionRequired,
                EmailUnverified,
                core_errors.CsrfFailed,
                *AUTH_ERRORS,
                *IDEMPOTENCY_ERRORS,
            ),
        },
    )
    def post(self, request: Request) -> Response | HttpResponse:
        def action(record: IdempotencyRecord | None) -> Response:
            data = _parse(FundingInput, request)
            result = services.envelope_create(
                owner=caller(request), idempotency=record, facts=request_facts(request), **data
            )
            return _funding_response(result, created=True)

        return idempotent(request, operation=operation_name("envelope.create"), action=action)


class EnvelopeDetailApi(APIView):
    @extend_schema(
        operation_id="envelopes_retrieve",
        summary="An envelope: balances, legs, debits, refunds, disputes",
        description="Balances add up: funded = debited + refunded + reserved + unspent + held + "
        "charged back. `held_micro` is money a chargeback took (Stripe withdrew it while the "
        "buyer's bank reviews the dispute): never debited or refunded, back to unspent if the "
        "dispute is won; `charged_back_micro` is what a lost dispute took for good. `disputes` "
        "lists each dispute's money, so a client can tell why money is held.",
        responses={
            200: success_envelope(schemas.EnvelopeOut, name="EnvelopeEnvelope"),
            **error_responses(core_errors.NotFound, *AUTH_ERRORS),
        },
    )
    def get(self, request: Request, envelope_id: str) -> Response:
        envelope_id = path_id(envelope_id)
        envelope = selectors.envelope_get_owned(user=caller(request), envelope_id=envelope_id)
        return ok(selectors.envelope_data(envelope))


class TopUpApi(APIView):
    permission_classes = [IsAuthenticated, SessionRequired, EmailVerified]
    throttle_classes = MONEY_MOVING

    @extend_schema(
        operation_id="envelopes_top_up",
        summary="Top an envelope up with another funding charge",
        request=FundingInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: success_envelope(schemas.EnvelopeOut, name="ToppedUpEnvelope"),
            202: success_envelope(schemas.EnvelopeOut, name="TopUpPendingEnvelope"),
            **error_responses(
                *FUNDING_ERRORS,
                core_errors.NotFound,
                core_errors.SessionRequired,
                EmailUnverified,
                core_errors.CsrfFailed,
                *AUTH_ERRORS,
                *IDEMPOTENCY_ERRORS,
            ),
        },
    )
    def post(self, request: Request, envelope_id: str) -> Response | HttpResponse:
        envelope_id = path_id(envelope_id)

        def action(record: IdempotencyRecord | None) -> Response:
            envelope = selectors.envelope_get_owned(user=caller(request), envelope_id=envelope_id)
            data = _parse(FundingInput, request)
            result = services.envelope_top_up(
                envelope=envelope, idempotency=record, facts=request_facts(request), **data
            )
            return _funding_response(result, created=True)

        return idempotent(
            request, operation=operation_name("envelope.top_up", envelope_id), action=action
        )


class DebitApi(APIView):
    permission_classes = [IsAuthenticated, django_permission("envelopes.add_debit")]
    throttle_classes = MONEY_MOVING

    @extend_schema(
        operation_id="envelopes_debit",
        summary="Record a debit (staff or a trusted service)",
        request=DebitInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: success_envelope(schemas.DebitCreatedOut, name="DebitedEnvelope"),
            **error_responses(
                InvalidAmount,
                AmountExceedsUnspent,
                core_errors.InvalidInput,
                core_errors.NotFound,
                core_errors.PermissionDenied,
                core_errors.CsrfFailed,
                *AUTH_ERRORS,
                *IDEMPOTENCY_ERRORS,
            ),
        },
    )
    def post(self, request: Request, envelope_id: str) -> Response | HttpResponse:
        from envelopes.models import Envelope

        envelope_id = path_id(envelope_id)

        def action(record: IdempotencyRecord | None) -> Response:
            envelope = Envelope.objects.filter(public_id=envelope_id).first()
            if envelope is None:
                raise core_errors.NotFound()
            data = _parse(DebitInput, request)
            debit = services.debit_add(
                envelope=envelope, actor=caller(request), idempotency=record, **data
            )
            envelope.refresh_from_db()
            return ok(
                {
                    "debit_id": debit.public_id,
                    "envelope": selectors.envelope_data(envelope, detail=False),
                },
                status=201,
            )

        return idempotent(
            request,
            operation=operation_name("envelope.debit", envelope_id),
            action=action,
            provider_calls=0,
        )


class RefundApi(APIView):
    permission_classes = [IsAuthenticated, SessionRequired, EmailVerified]
    throttle_classes = MONEY_MOVING

    @extend_schema(
        operation_id="envelopes_refund",
        summary="Return the unspent balance to the funding cards",
        description="An empty body (or `{}`) refunds the whole unspent balance, and the answer "
        "says `requested: whole_unspent`; "
        '`{"amount_micro": N}` '
        "refunds N. Last in, first out across funding charges; each leg rounds down to a cent. "
        "Money a dispute holds (`held_micro`) is not unspent and is never refunded. "
        "200 with status refunded, partially_refunded or failed; 202 with status pending when "
        "some leg's outcome is unknown.",
        request=RefundInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            200: success_envelope(schemas.RefundCreatedOut, name="RefundEnvelope"),
            202: success_envelope(schemas.RefundCreatedOut, name="RefundPendingEnvelope"),
            **error_responses(
                InvalidAmount,
                AmountExceedsUnspent,
                NothingToRefund,
                core_errors.InvalidInput,
                core_errors.NotFound,
                core_errors.SessionRequired,
                EmailUnverified,
                core_errors.CsrfFailed,
                *AUTH_ERRORS,
                *IDEMPOTENCY_ERRORS,
            ),
        },
    )
    def post(self, request: Request, envelope_id: str) -> Response | HttpResponse:
        envelope_id = path_id(envelope_id)

        def action(record: IdempotencyRecord | None) -> Response:
            data = _parse(RefundInput, request)
            operation = services.envelope_refund(
                envelope_id=envelope_id, actor=caller(request), idempotency=record, **data
            )
            body = selectors.refund_data(operation)
            given = "amount_micro" in data
            body["requested"] = (
                schemas.REQUESTED_AMOUNT if given else schemas.REQUESTED_WHOLE_UNSPENT
            )
            return ok(body, status=202 if body["status"] == "pending" else 200)

        return idempotent(
            request, operation=operation_name("envelope.refund", envelope_id), action=action
        )


class EnvelopeRefundsApi(APIView):
    @extend_schema(
        operation_id="envelopes_refunds",
        summary="An envelope's refund operations with their legs and verdicts",
        responses={
            200: success_envelope(schemas.RefundListOut, name="RefundListEnvelope"),
            **error_responses(core_errors.NotFound, *AUTH_ERRORS),
        },
    )
    def get(self, request: Request, envelope_id: str) -> Response:
        envelope_id = path_id(envelope_id)
        envelope = selectors.envelope_get_owned(user=caller(request), envelope_id=envelope_id)
        operations = envelope.refunds.order_by("-created_at", "-id")
        return ok({"results": [selectors.refund_data(op) for op in operations]})


class RefundDetailApi(APIView):
    @extend_schema(
        operation_id="refunds_retrieve",
        summary="A refund operation with its legs and their verification verdicts",
        responses={
            200: success_envelope(schemas.RefundOut, name="RefundDetailEnvelope"),
            **error_responses(core_errors.NotFound, *AUTH_ERRORS),
        },
    )
    def get(self, request: Request, refund_id: str) -> Response:
        refund_id = path_id(refund_id)
        return ok(
            selectors.refund_data(
                selectors.refund_get_owned(user=caller(request), refund_id=refund_id)
            )
        )
