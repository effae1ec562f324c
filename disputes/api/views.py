"""The staff API of disputes (SPEC §9). Views parse, authorize, call one service, render. Approval
and filing are not here: they are acts of a person in the admin."""

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import exceptions as core_errors
from core.api.idempotent import idempotent, operation_name
from core.api.parsing import (
    Strict,
    StrictCharField,
    page_params,
    parse_body,
    path_id,
    query_text,
    request_object,
)
from core.api.permissions import caller
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
from disputes import exceptions as errors
from disputes import selectors, services
from disputes.api import schemas
from disputes.permissions import (
    ADMIT_EVIDENCE,
    ENTER_DISPUTE,
    PREPARE_PACKET,
    READ_DISPUTES,
    Rule,
)

AUTH_ERRORS = (
    core_errors.NotAuthenticated,
    core_errors.AuthenticationFailed,
    core_errors.PermissionDenied,
)
IDEMPOTENCY_ERRORS = (
    InvalidIdempotencyKey,
    IdempotencyKeyInUse,
    IdempotencyKeyConflict,
    IdempotencyKeyOtherSurface,
)
EVIDENCE_ERRORS = (
    errors.EvidenceUnknownField,
    errors.EvidenceMissingField,
    errors.EvidenceInvalidRef,
    errors.EvidenceInvalidSha256,
    errors.EvidenceInvalidKind,
    errors.EvidenceTooLong,
    errors.EvidenceRawPayload,
    errors.EvidenceCredential,
    errors.EvidenceCardNumber,
    errors.EvidenceRefConflict,
    errors.ReceiptDetailRefused,
)
IDEMPOTENCY_HEADER = IDEMPOTENCY_KEY_HEADER  # one definition, with its rules: core/api/schema.py

# A query text parameter: anything but a NUL character (core.api.parsing.query_text).
NO_NUL = r"^[^\x00]*$"


class AsTheAdmin(BasePermission):
    """The rule the admin asks for the same act (disputes/permissions.py), by method: checked
    before any lookup, so it reveals nothing about ids. A method a view does not name (405
    follows) needs the read rule at least."""

    def has_permission(self, request: Request, view: Any) -> bool:
        rules: dict[str, Rule] = view.rules
        rule = rules.get(request.method or "", rules.get("GET", READ_DISPUTES))
        rule.require(request.user)
        return True


STAFF = [IsAuthenticated, AsTheAdmin]


class DisputeInput(Strict):
    dispute_id = StrictCharField(max_length=100, help_text="The provider's dispute id (dp_…)")
    charge_id = StrictCharField(max_length=100, help_text="The disputed charge (ch_…)")
    amount_micro = schemas.DisputeMicroField()
    currency = schemas.DisputeCurrencyField(
        required=False, max_length=10, help_text="usd (the only one)"
    )
    reason = StrictCharField(max_length=60, help_text="Stripe's dispute reason, e.g. fraudulent")
    response_deadline = serializers.DateTimeField(required=False, allow_null=True)


class EvidenceInput(Strict):
    """For the schema only: the view hands the raw object to the admission rules
    (disputes/evidence.py), which no schema can state in full (credentials, card numbers and raw
    payloads are refused wherever they appear)."""

    ref = serializers.RegexField(schemas.EVIDENCE_REF_PATTERN, max_length=200)
    sha256 = serializers.RegexField(schemas.EVIDENCE_SHA256_PATTERN)
    kind = serializers.ChoiceField(
        choices=["delivery", "consent", "communication", "policy", "other"]
    )
    summary = serializers.CharField(max_length=500)


class PacketInput(Strict):
    """No fields: the packet is prepared from Vouch's own receipts and the admitted evidence."""


class DisputeListApi(APIView):
    permission_classes = STAFF
    rules = {"GET": READ_DISPUTES, "POST": ENTER_DISPUTE}
    throttle_classes = MONEY_MOVING

    @extend_schema(
        operation_id="disputes_list",
        summary="Disputes, deadline first (staff)",
        description="Each with its current packet's state."
        + schemas.permission_needed(READ_DISPUTES),
        parameters=[
            # `query_text` refuses a NUL character (400): the schema says so.
            OpenApiParameter(
                "dispute_id", str, description="The provider's dispute id", pattern=NO_NUL
            ),
            OpenApiParameter("charge", str, description="The disputed charge id", pattern=NO_NUL),
            *PAGE_PARAMETERS,
        ],
        responses={
            200: success_envelope(schemas.DisputeListOut, name="DisputeListEnvelope"),
            **error_responses(core_errors.InvalidInput, *AUTH_ERRORS),
        },
    )
    def get(self, request: Request) -> Response:
        limit, offset = page_params(request)
        disputes = selectors.disputes_filtered(
            dispute_id=query_text(request, "dispute_id"),
            charge=query_text(request, "charge"),
        )
        total = disputes.count()
        page = list(disputes[offset : offset + limit])
        return ok(
            {
                "results": [selectors.dispute_data(d, detail=False) for d in page],
                "count": total,
                "next_offset": offset + limit if offset + limit < total else None,
            }
        )

    @extend_schema(
        operation_id="disputes_enter",
        summary="Enter a dispute by hand (staff); a packet is prepared at once",
        description="The dispute is recorded as the provider shows it: Vouch reads it first and "
        "records its charge, amount, currency and reason from that read. What was typed must "
        "agree (`dispute_mismatch`, 409, `details.fields` naming each field typed against the "
        "provider's); a dispute the provider does not hold is `dispute_not_at_provider` (404); a "
        "read without an answer records nothing (`dispute_read_unavailable`, 503: retry)."
        + schemas.permission_needed(ENTER_DISPUTE),
        request=DisputeInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: success_envelope(schemas.DisputeOut, name="DisputeEnteredEnvelope"),
            **error_responses(
                core_errors.InvalidInput,
                errors.UnsupportedCurrency,
                errors.DisputeAlreadyRecorded,
                errors.DisputeMismatch,
                errors.DisputeNotAtProvider,
                errors.DisputeReadUnavailable,
                core_errors.CsrfFailed,
                *AUTH_ERRORS,
                *IDEMPOTENCY_ERRORS,
            ),
        },
    )
    def post(self, request: Request) -> Response | HttpResponse:
        def action(record: IdempotencyRecord | None) -> Response:
            data = parse_body(DisputeInput, request)
            packet = services.dispute_enter(actor=caller(request), data=data, idempotency=record)
            return ok(selectors.dispute_data(packet.dispute), status=201)

        return idempotent(
            request,
            operation=operation_name("dispute.enter"),
            action=action,
            # The dispute read, then intended_submission_method=manual unless it says so already.
            provider_calls=2,
        )


class DisputeDetailApi(APIView):
    permission_classes = STAFF
    rules = {"GET": READ_DISPUTES}

    @extend_schema(
        operation_id="disputes_retrieve",
        summary="A dispute with its admitted evidence and current packet (staff)",
        description="By Vouch's id (`dsp_…`) or the provider's (`dp_…`)."
        + schemas.permission_needed(READ_DISPUTES),
        responses={
            200: success_envelope(schemas.DisputeOut, name="DisputeEnvelope"),
            **error_responses(core_errors.NotFound, *AUTH_ERRORS),
        },
    )
    def get(self, request: Request, dispute_id: str) -> Response:
        dispute_id = path_id(dispute_id)
        return ok(selectors.dispute_data(selectors.dispute_named(dispute_id)))


class EvidenceApi(APIView):
    permission_classes = STAFF
    rules = {"POST": ADMIT_EVIDENCE}
    throttle_classes = MONEY_MOVING

    @extend_schema(
        operation_id="disputes_evidence_admit",
        summary="Admit external evidence as {ref, sha256, kind, summary} (staff)",
        description="Raw payloads, unknown fields, receipt detail and anything that looks like a "
        "credential or a card number are refused with a code naming the rule. A new admission "
        "gives the dispute a new packet version holding it at once, unless the current version "
        "is approved or filed (or being filed). The admitter contributes to every version that "
        "holds the evidence (four eyes)." + schemas.permission_needed(ADMIT_EVIDENCE),
        request=EvidenceInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: success_envelope(schemas.EvidenceAdmittedOut, name="EvidenceAdmittedEnvelope"),
            200: success_envelope(schemas.EvidenceAdmittedOut, name="EvidenceAlreadyEnvelope"),
            **error_responses(
                *EVIDENCE_ERRORS,
                core_errors.NotFound,
                core_errors.CsrfFailed,
                *AUTH_ERRORS,
                *IDEMPOTENCY_ERRORS,
            ),
        },
    )
    def post(self, request: Request, dispute_id: str) -> Response | HttpResponse:
        dispute_id = path_id(dispute_id)
        # One dispute, one operation name, whichever id the path gives (`dsp_…` or `dp_…`). An
        # unknown dispute is a 404 before any key is claimed: nothing is stored under it.
        dispute = selectors.dispute_named(dispute_id)

        def action(record: IdempotencyRecord | None) -> Response:
            data = request_object(request)
            evidence, created = services.evidence_admit(
                dispute=dispute, actor=caller(request), data=data, idempotency=record
            )
            body = {
                "evidence": selectors.evidence_data(evidence),
                "created": created,
                "dispute": selectors.dispute_data(dispute),
            }
            return ok(body, status=201 if created else 200)

        return idempotent(
            request,
            operation=operation_name("dispute.evidence", dispute.public_id),
            action=action,
            provider_calls=0,
        )


class PacketApi(APIView):
    permission_classes = STAFF
    rules = {"POST": PREPARE_PACKET}
    throttle_classes = MONEY_MOVING

    @extend_schema(
        operation_id="disputes_packet_prepare",
        summary="Prepare the dispute's packet again (staff)",
        description="A new version from Vouch's own receipts and the admitted evidence, through "
        "the configured drafter and deterministic finalization. Body `{}`: caller-supplied "
        "receipts are refused (`receipt_detail_refused`). The caller contributes to the new "
        "version and cannot approve it. A dispute the card network allows no response to "
        "(Stripe's `due_by` 0) takes none: `dispute_response_not_allowed`."
        + schemas.permission_needed(PREPARE_PACKET),
        request=PacketInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: success_envelope(schemas.DisputeOut, name="PacketPreparedEnvelope"),
            **error_responses(
                errors.ReceiptDetailRefused,
                errors.DisputeResponseNotAllowed,
                errors.PacketAlreadyFiled,
                errors.PacketFilingUnderway,
                errors.PacketReadbackFailed,
                core_errors.InvalidInput,
                core_errors.NotFound,
                core_errors.CsrfFailed,
                *AUTH_ERRORS,
                *IDEMPOTENCY_ERRORS,
            ),
        },
    )
    def post(self, request: Request, dispute_id: str) -> Response | HttpResponse:
        dispute_id = path_id(dispute_id)
        dispute = selectors.dispute_named(dispute_id)  # the canonical operation name, as above

        def action(record: IdempotencyRecord | None) -> Response:
            data = request_object(request)
            if any("receipt" in str(k) for k in data):
                raise errors.ReceiptDetailRefused(details={"fields": sorted(map(str, data))})
            parse_body(PacketInput, request)
            packet = services.packet_prepare(
                dispute=dispute, requested_by=caller(request), idempotency=record
            )
            return ok(selectors.dispute_data(packet.dispute), status=201)

        return idempotent(
            request,
            operation=operation_name("dispute.packet", dispute.public_id),
            action=action,
            provider_calls=0,
        )
