"""POST /webhooks/stripe (SPEC §7): verify the signature, store the event once, acknowledge fast,
process asynchronously."""

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from providers import StripeProvider, WebhookSignatureError
from verification import clock
from verification.services import provider_event_store
from verification.tasks import process_event


@csrf_exempt
@require_POST
def stripe_webhook(request: HttpRequest) -> JsonResponse:
    try:
        raw = request.body.decode("utf-8")
        event = StripeProvider.webhook_verify(
            request.body,
            request.headers.get("Stripe-Signature", ""),
            settings.STRIPE_WEBHOOK_SECRETS,
            tolerance_s=settings.STRIPE_WEBHOOK_TOLERANCE_S,
            now=clock.now().timestamp(),
        )
    except (WebhookSignatureError, UnicodeDecodeError) as exc:
        return JsonResponse(
            {"error": {"code": "invalid_signature", "message": str(exc)}}, status=400
        )
    stored, created = provider_event_store(event=event, raw=raw)
    if created:
        transaction.on_commit(lambda: process_event.delay(stored.pk))
    return JsonResponse({"received": True, "duplicate": not created})
