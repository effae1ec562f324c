from django.conf import settings
from django.db import models


class Funding(models.Model):
    """The caller's payment: a charge at the provider."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    charge_id = models.CharField(max_length=255)
    amount = models.BigIntegerField()  # cents

    def __str__(self) -> str:
        return self.charge_id


class Refund(models.Model):
    funding = models.ForeignKey(Funding, on_delete=models.CASCADE)
    stripe_refund_id = models.CharField(max_length=255)
    amount = models.BigIntegerField()  # cents
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.stripe_refund_id
