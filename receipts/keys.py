"""Receipt signing and trust (SPEC §8).

The platform signs each receipt's canonical bytes with its Ed25519 receipt key; the receipt
records the key id and the key's environment. Trust never comes from what a receipt says about
itself: verification looks the key id up among the CONFIGURED trusted keys, and trusts it only if
that configured key's environment is this deployment's own environment. A `local-development`
key is never trusted, even when configured.

Settings:
- `RECEIPT_SIGNING_KEY`: base64 of the 32-byte Ed25519 private seed (empty: no receipts written)
- `RECEIPT_SIGNING_KEY_ID`: the id the signature names
- `RECEIPT_SIGNING_ENVIRONMENT`: `production`, `sandbox` or `local-development`
- `RECEIPT_TRUSTED_KEYS`: {key_id: {"public_key": base64 of the raw 32 bytes, "environment": …}}
- `VOUCH_ENVIRONMENT`: this deployment's environment (`production` or `sandbox`)

A production deployment reads live provider objects, any other test-mode ones: a receipt records
the provider object's `livemode` and is trusted only when it is the deployment's
(`deployment_livemode`, checked by receipts.selectors.receipt_verify).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings

from receipts.exceptions import ReceiptKeyInvalid, ReceiptKeyMissing


class Environment(StrEnum):
    PRODUCTION = "production"
    SANDBOX = "sandbox"
    LOCAL_DEVELOPMENT = "local-development"


ENVIRONMENTS = frozenset(e.value for e in Environment)


class TrustCode(StrEnum):
    TRUSTED = "trusted"
    UNKNOWN_KEY = "unknown_key"
    BAD_SIGNATURE = "bad_signature"
    ENVIRONMENT_MISMATCH = "environment_mismatch"
    LOCAL_DEVELOPMENT_KEY = "local_development_key"
    DIGEST_MISMATCH = "digest_mismatch"


@dataclass(frozen=True)
class TrustResult:
    """The verdict on one signature: `code` is `trusted` or the reason it is not. `environment` is
    the configured key's environment (None for an unknown key), never the receipt's claim."""

    code: TrustCode
    key_id: str
    environment: str | None = None

    @property
    def ok(self) -> bool:
        return self.code is TrustCode.TRUSTED


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    environment: str
    private_key: Ed25519PrivateKey

    def sign(self, message: bytes) -> str:
        """The Ed25519 signature of `message`, base64url without padding."""
        return b64url_encode(self.private_key.sign(message))

    @property
    def public_key_b64(self) -> str:
        return public_key_b64(self.private_key.public_key())


@dataclass(frozen=True)
class TrustedKey:
    key_id: str
    environment: str
    public_key: Ed25519PublicKey


# --- encodings ---------------------------------------------------------------------------------


def b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64_32(text: str, what: str) -> bytes:
    """32 raw bytes from standard or URL-safe base64 (padding optional)."""
    cleaned = text.strip().replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ReceiptKeyInvalid(f"{what} is not base64: {exc}") from None
    if len(raw) != 32:
        raise ReceiptKeyInvalid(f"{what} must be 32 bytes of base64, not {len(raw)}")
    return raw


def public_key_b64(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def private_key_from_seed(seed_b64: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(_b64_32(seed_b64, "the signing key seed"))


def encode_seed(seed: bytes) -> str:
    """A raw 32-byte seed as RECEIPT_SIGNING_KEY expects it (base64)."""
    if len(seed) != 32:
        raise ValueError("an Ed25519 seed is 32 bytes")
    return base64.b64encode(seed).decode("ascii")


def public_key_of(seed: bytes) -> str:
    """The public key (base64 of the raw 32 bytes) of a raw 32-byte seed."""
    return public_key_of_seed(encode_seed(seed))


def seed_from_text(text: str) -> str:
    """A deterministic seed (base64) from a constant: for test and local-development keys only,
    so that every process of one test run signs with the same key."""
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode("ascii")


def public_key_of_seed(seed_b64: str) -> str:
    return public_key_b64(private_key_from_seed(seed_b64).public_key())


def key_id_suggestion(environment: str, public_b64: str) -> str:
    digest = hashlib.sha256(base64.b64decode(public_b64)).hexdigest()
    return f"{environment}-{digest[:12]}"


def key_generate(environment: str) -> dict[str, str]:
    """A new key: {seed, public_key, key_id, environment} (seed and public key in base64)."""
    if environment not in ENVIRONMENTS:
        raise ValueError(f"environment must be one of {sorted(ENVIRONMENTS)}")
    seed = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
    public = public_key_of_seed(seed)
    return {
        "seed": seed,
        "public_key": public,
        "key_id": key_id_suggestion(environment, public),
        "environment": environment,
    }


# --- configuration -----------------------------------------------------------------------------


def deployment_environment() -> str:
    return str(getattr(settings, "VOUCH_ENVIRONMENT", Environment.PRODUCTION))


def deployment_livemode() -> bool:
    """The provider's `livemode` this deployment's objects carry: true in production (live
    Stripe), false anywhere else (Stripe test mode or the sandbox)."""
    return deployment_environment() == Environment.PRODUCTION


def signing_key_configured() -> bool:
    return bool(getattr(settings, "RECEIPT_SIGNING_KEY", ""))


def signing_key() -> SigningKey:
    """The key this deployment signs receipts with. ReceiptKeyMissing if none is configured,
    ReceiptKeyInvalid if it cannot be read."""
    seed = str(getattr(settings, "RECEIPT_SIGNING_KEY", "") or "")
    if not seed:
        raise ReceiptKeyMissing(
            "Set RECEIPT_SIGNING_KEY (and RECEIPT_SIGNING_KEY_ID): "
            "`python manage.py receipt_keygen` makes one."
        )
    key_id = str(getattr(settings, "RECEIPT_SIGNING_KEY_ID", "") or "")
    if not key_id:
        raise ReceiptKeyInvalid("RECEIPT_SIGNING_KEY_ID is empty: the signature must name its key")
    environment = str(getattr(settings, "RECEIPT_SIGNING_ENVIRONMENT", "") or "")
    if environment not in ENVIRONMENTS:
        raise ReceiptKeyInvalid(
            f"RECEIPT_SIGNING_ENVIRONMENT {environment!r} is not one of {sorted(ENVIRONMENTS)}"
        )
    return SigningKey(key_id, environment, private_key_from_seed(seed))


def trusted_keys() -> dict[str, TrustedKey]:
    """The configured trusted public keys. ReceiptKeyInvalid names an entry that cannot be read."""
    configured: Any = getattr(settings, "RECEIPT_TRUSTED_KEYS", {}) or {}
    if not isinstance(configured, dict):
        raise ReceiptKeyInvalid(
            "RECEIPT_TRUSTED_KEYS must map key ids to {public_key, environment}"
        )
    keys: dict[str, TrustedKey] = {}
    for key_id, entry in configured.items():
        if not isinstance(entry, dict):
            raise ReceiptKeyInvalid(f"RECEIPT_TRUSTED_KEYS[{key_id!r}] must be a mapping")
        environment = str(entry.get("environment", ""))
        if environment not in ENVIRONMENTS:
            raise ReceiptKeyInvalid(
                f"RECEIPT_TRUSTED_KEYS[{key_id!r}].environment {environment!r} is not one of "
                f"{sorted(ENVIRONMENTS)}"
            )
        raw = _b64_32(str(entry.get("public_key", "")), f"RECEIPT_TRUSTED_KEYS[{key_id!r}]")
        keys[str(key_id)] = TrustedKey(
            str(key_id), environment, Ed25519PublicKey.from_public_bytes(raw)
        )
    return keys


def configuration_problems() -> list[str]:
    """What is wrong with the configured keys (empty when nothing is; a missing signing key is not
    a problem here: the deployment then writes no receipts and says so in its log)."""
    problems = []
    if signing_key_configured():
        try:
            signing_key()
        except ReceiptKeyInvalid as exc:
            problems.append(str(exc))
    try:
        trusted_keys()
    except ReceiptKeyInvalid as exc:
        problems.append(str(exc))
    if deployment_environment() not in ENVIRONMENTS:
        problems.append(
            f"VOUCH_ENVIRONMENT {deployment_environment()!r} is not one of {sorted(ENVIRONMENTS)}"
        )
    return problems


# --- verification ------------------------------------------------------------------------------


def signature_verify(*, message: bytes, signature: str, key_id: str) -> TrustResult:
    """Whether `signature` over `message` is trusted by THIS deployment: the key id must be
    configured (else `unknown_key`), the signature must verify with the configured public key
    (`bad_signature`), the key must not be a local-development key (`local_development_key`) and
    its configured environment must be the deployment's (`environment_mismatch`)."""
    trusted = trusted_keys().get(key_id)
    if trusted is None:
        return TrustResult(TrustCode.UNKNOWN_KEY, key_id)
    try:
        trusted.public_key.verify(b64url_decode(signature), message)
    except (InvalidSignature, ValueError, binascii.Error):
        return TrustResult(TrustCode.BAD_SIGNATURE, key_id, trusted.environment)
    if trusted.environment == Environment.LOCAL_DEVELOPMENT:
        return TrustResult(TrustCode.LOCAL_DEVELOPMENT_KEY, key_id, trusted.environment)
    if trusted.environment != deployment_environment():
        return TrustResult(TrustCode.ENVIRONMENT_MISMATCH, key_id, trusted.environment)
    return TrustResult(TrustCode.TRUSTED, key_id, trusted.environment)
