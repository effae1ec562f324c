from __future__ import annotations

import secrets
import string

_ALPHABET = string.ascii_letters + string.digits


def new_id(prefix: str, length: int = 24) -> str:
    """A Stripe-looking id: `re_3Nk...` (prefix, underscore, base62)."""
    return f"{prefix}_{''.join(secrets.choice(_ALPHABET) for _ in range(length))}"
