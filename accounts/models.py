from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models.functions import Upper


class User(AbstractUser):
    """Vouch's user: buyers and operations staff alike (staff by `is_staff` and permissions)."""

    class Meta(AbstractUser.Meta):
        # The ops search box (ops/search/) finds a person by e-mail, whatever its case.
        indexes = [models.Index(Upper("email"), name="user_email_upper")]


# Tokens read; moving money needs a session: docs/decisions/0005-no-bearer-token-moves-money.md
class ApiToken(models.Model):
    """A personal API token. Only its SHA-256 digest is stored; the token itself is shown once,
    when issued. Tokens may read; they never move money (SPEC §5)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text="What the token is for.")
    prefix = models.CharField(
        max_length=16, help_text="The token's first characters, to recognise it in lists."
    )
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
