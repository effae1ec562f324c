from __future__ import annotations

import random
import string

_ALPHABET = string.ascii_letters + string.digits
# Ids only need to be unique, not unguessable (a seed makes tens of thousands a second), and
# must not follow the seeded randomness tests use for faults and deliveries: a generator of
# their own, seeded from the operating system.
_random = random.Random()  # noqa: S311 - ids, not secrets


def new_id(prefix: str, length: int = 24) -> str:
    """A Stripe-looking id: `re_3Nk...` (prefix, underscore, base62)."""
    return f"{prefix}_{''.join(_random.choices(_ALPHABET, k=length))}"
