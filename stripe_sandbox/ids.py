from __future__ import annotations

import random
import string

_ALPHABET = string.ascii_letters + string.digits
# Ids only need to be unique, not unguessable (a seed makes tens of thousands a second), and
# must not follow the seeded randomness tests use for faults and deliveries: a generator of
# their own, seeded from the operating system.
_random = random.Random()  # noqa: S311 - ids, not secrets


# Random bytes mapped onto base62 in C (bytes.translate): a seed makes 65,000 ids for 5,000
# charges, and drawing them a character at a time cost half its second. The mapping favours the
# first 8 characters slightly, which uniqueness does not mind.
_BASE62 = bytes(ord(_ALPHABET[i % len(_ALPHABET)]) for i in range(256))


def new_id(prefix: str, length: int = 24) -> str:
    """A Stripe-looking id: `re_3Nk...` (prefix, underscore, base62)."""
    return f"{prefix}_{_random.randbytes(length).translate(_BASE62).decode()}"
