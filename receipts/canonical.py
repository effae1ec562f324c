"""The canonical form of a receipt body and its content address (SPEC §8): RFC 8785 (JSON
Canonicalization Scheme) bytes, and `rcpt_` + the SHA-256 of those bytes. Any change to the body
gives another id."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import rfc8785

RECEIPT_ID_PREFIX = "rcpt_"
RECEIPT_ID_PATTERN = re.compile(r"^rcpt_[0-9a-f]{64}$")


# Every digest and signature over JSON is over these bytes: docs/decisions/0004-rfc8785-digests.md
def canonical_bytes(body: Mapping[str, Any]) -> bytes:
    """RFC 8785: keys sorted by UTF-16 code units, no insignificant whitespace, ECMAScript number
    formatting, UTF-8. Raises rfc8785.CanonicalizationError on a value JSON cannot carry exactly
    (an integer beyond 2**53, NaN)."""
    return rfc8785.dumps(dict(body))


def receipt_id_of(canonical: bytes) -> str:
    return RECEIPT_ID_PREFIX + hashlib.sha256(canonical).hexdigest()
