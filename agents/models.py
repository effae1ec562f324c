"""A refund proposed through MCP (SPEC §16). No bearer token moves money: the request stores the
last-in-first-out preview and waits for the envelope's owner to confirm it in the browser, where
the refund runs as SPEC §3 describes, under the request's idempotency record."""

from django.conf import settings
from django.db import models
from django.utils import timezone
from oauth2_provider.settings import oauth2_settings

from envelopes.models import public_id


def _refund_request_id() -> str:
    return public_id("rrq")


# A proposal, not a refund: docs/decisions/0005-no-bearer-token-moves-money.md
class RefundRequest(models.Model):
    class Status(models.TextChoices):
        # `expired` is not stored: a pending request whose `expires_at` has passed is expired.
        PENDING = "pending_confirmation", "pending confirmation"
        CONFIRMED = "confirmed", "confirmed"
        REFUSED = "refused", "refused"

    public_id = models.CharField(
        max_length=40, unique=True, default=_refund_request_id, editable=False
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="refund_requests"
    )
    envelope = models.ForeignKey(
        "envelopes.Envelope", on_delete=models.PROTECT, related_name="refund_requests"
    )
    amount_micro = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Micro-dollars asked for; empty: the whole unspent balance.",
    )
    preview = models.JSONField(
        help_text="The LIFO preview as computed when the request was made (legs, amounts, "
        "remainder); nothing was reserved."
    )
    status = models.CharField(max_length=30, choices=Status.choices, default=Status.PENDING)
    refusal_code = models.CharField(
        max_length=64, blank=True, help_text="Why confirming was refused (a REST error code)."
    )
    # The MCP call's idempotency record (surface `mcp`, operation `envelope.refund:<env id>`): the
    # refund runs under it, so a confirmation that crashed resumes the refund it began.
    idempotency = models.ForeignKey(
        "core.IdempotencyRecord",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    refund = models.OneToOneField(
        "envelopes.RefundOperation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="request",
    )
    client_id = models.CharField(
        max_length=100, blank=True, help_text="The OAuth client that asked (its client id)."
    )
    expires_at = models.DateTimeField()
    confirm_lease_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A confirmation in progress holds the request until then; another waits.",
    )
    confirmed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["owner", "created_at"])]
        constraints = [
            # One request per MCP call: a re-sent call (a dropped stream) or a resumed one finds
            # the request its key made instead of making another.
            models.UniqueConstraint(
                fields=["idempotency"], name="one_refund_request_per_idempotency_record"
            )
        ]

    def __str__(self) -> str:
        return self.public_id


class RedeemedCode(models.Model):
    """An authorization code already exchanged, kept (as a SHA-256 checksum, never the code) with
    the token family it issued: a code presented again means it leaked, and the tokens it issued
    are revoked (OAuth 2.1 §4.1.3)."""

    code_checksum = models.CharField(max_length=64, unique=True)
    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    # The refresh tokens' family (every rotation keeps it) and the first access token.
    token_family = models.UUIDField(null=True, blank=True)
    access_token_checksum = models.CharField(max_length=64, blank=True, default="")
    redeemed_at = models.DateTimeField(auto_now_add=True)
    replayed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"code {self.code_checksum[:12]}… redeemed {self.redeemed_at:%Y-%m-%d %H:%M}"


class RegisteredClient(models.Model):
    """An OAuth client that registered itself (SPEC §16), beside django-oauth-toolkit's
    Application: by RFC 7591 dynamic registration, or by presenting a Client ID Metadata
    Document. Staff-registered clients have no row. Its consent page says it is unverified; it
    expires when unused (agents.oauth.registration.dynamic_clients_expire)."""

    class How(models.TextChoices):
        DYNAMIC = "dynamic", "dynamic registration (RFC 7591)"
        METADATA_DOCUMENT = "metadata_document", "client ID metadata document"

    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="registration"
    )
    how = models.CharField(max_length=20, choices=How.choices)
    metadata = models.JSONField(
        default=dict, help_text="The client metadata as the client gave it (RFC 7591 §2)."
    )
    registered_from = models.CharField(max_length=64, blank=True, default="")
    registered_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(
        null=True, blank=True, help_text="When a token was last issued to it."
    )

    def __str__(self) -> str:
        return f"{self.application} ({self.get_how_display()})"
