"""Read the caller's funding row, refund through the Stripe SDK's default client, insert one
row, answer JSON. Nothing else: no ledger, no idempotency, no verification run."""

import stripe
from django.conf import settings
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from naive.refunds.models import Funding, Refund

client = stripe.StripeClient(
    settings.STRIPE_API_KEY, base_addresses={"api": settings.STRIPE_API_BASE}
)


class RefundInput(serializers.Serializer):
    amount_micro = serializers.IntegerField(min_value=10_000)  # the bench's body; 1 cent


@method_decorator(ensure_csrf_cookie, name="dispatch")
class Me(APIView):
    """Who is logged in; sets the CSRF cookie as a page would."""

    def get(self, request: Request) -> Response:
        return Response({"data": {"username": request.user.get_username()}})


class RefundCreate(APIView):
    def post(self, request: Request) -> Response:
        body = RefundInput(data=request.data)
        body.is_valid(raise_exception=True)
        cents = body.validated_data["amount_micro"] // 10_000
        funding = Funding.objects.get(user=request.user)
        refund = client.v1.refunds.create(params={"charge": funding.charge_id, "amount": cents})
        row = Refund.objects.create(funding=funding, stripe_refund_id=refund.id, amount=cents)
        return Response(
            {
                "data": {
                    "id": row.id,
                    "stripe_refund_id": row.stripe_refund_id,
                    "status": "refunded",
                }
            },
            status=status.HTTP_201_CREATED,
        )
