"""POST /webhooks/stripe (SPEC §7): verify the signature, store the event once, acknowledge fast,
process asynchronously. Every refusal is a 4xx in the error envelope of SPEC §13, nothing stored."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.api.responses import error_body
from providers import StripeProvider, WebhookSignatureError
from verification import clock
from verification.events import InvalidProviderEvent
from verification.services import provider_event_store
from verification.tasks import process_events_soon


def _refused(code: str, message: str, status: int = 400, details: object = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, details), status=status)


@csrf_exempt
@require_POST
def stripe_webhook(request: HttpRequest) -> JsonResponse:
    try:
        body = request.body
    except RequestDataTooBig:
        return _refused(
            "payload_too_large",
            f"The body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
            status=413,
        )
    try:
        raw = body.decode("utf-8")
        event = StripeProvider.webhook_verify(
            body,
            request.headers.get("Stripe-Signature", ""),
            settings.STRIPE_WEBHOOK_SECRETS,
            tolerance_s=settings.STRIPE_WEBHOOK_TOLERANCE_S,
            now=clock.now().timestamp(),
        )
    except (WebhookSignatureError, UnicodeDecodeError) as exc:
        return _refused("invalid_signature", str(exc))
    except RecursionError:  # parsed only once the signature verified: JSON nested too deep
        return _refused("malformed_request", "The payload's JSON is nested too deep.")
    try:
        _, created = provider_event_store(event=event, raw=raw)
    except InvalidProviderEvent as exc:
        return _refused(exc.code, exc.message, details=exc.details)
    if created:
        transaction.on_commit(process_events_soon)
    return JsonResponse({"received": True, "duplicate": not created})
