"""Receipt keys and trust, rule by rule (SPEC §8), without a receipt or a database: Ed25519 over
the canonical bytes (RFC 8032's own test vector), keys read from base64 (standard or URL-safe,
padding optional, exactly 32 bytes, else a named configuration error), and the trust verdict of
one signature: unknown key, bad signature, local-development key, environment mismatch, trusted —
decided from the CONFIGURED key, never from what is claimed."""

import base64
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from receipts import keys
from receipts.exceptions import ReceiptKeyInvalid, ReceiptKeyMissing

# RFC 8032, section 7.1, TEST 1: the secret key, its public key, the signature of the empty message.
RFC_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555"
    "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)
SEED_B64 = base64.b64encode(RFC_SEED).decode()
PUBLIC_B64 = base64.b64encode(RFC_PUBLIC).decode()
MESSAGE = b'{"amount_micro":1000000,"kind":"charge"}'


def _trust(settings: Any, *, environment: str, deployment: str = "sandbox") -> None:
    """This deployment (`deployment`) trusts the RFC key as `k1` of `environment`."""
    settings.VOUCH_ENVIRONMENT = deployment
    settings.RECEIPT_TRUSTED_KEYS = {"k1": {"public_key": PUBLIC_B64, "environment": environment}}


def _sign(message: bytes = MESSAGE) -> str:
    return keys.b64url_encode(keys.private_key_from_seed(SEED_B64).sign(message))


# --- encodings and key material --------------------------------------------------------------


def test_a_seed_signs_as_rfc8032_says() -> None:
    signing = keys.SigningKey("k1", "sandbox", keys.private_key_from_seed(SEED_B64))
    assert keys.b64url_decode(signing.sign(b"")) == RFC_SIGNATURE
    assert signing.public_key_b64 == PUBLIC_B64
    assert keys.public_key_of_seed(SEED_B64) == PUBLIC_B64
    assert keys.public_key_of(RFC_SEED) == PUBLIC_B64
    assert keys.encode_seed(RFC_SEED) == SEED_B64


def test_a_signature_is_base64url_without_padding() -> None:
    signature = keys.SigningKey("k1", "sandbox", keys.private_key_from_seed(SEED_B64)).sign(b"")
    assert signature == base64.urlsafe_b64encode(RFC_SIGNATURE).decode().rstrip("=")
    assert not set(signature) & set("=+/")
    assert len(signature) == 86  # 64 bytes, unpadded


@pytest.mark.parametrize("length", [*range(66), 256])
def test_base64url_round_trips_any_length_without_padding(length: int) -> None:
    raw = bytes((0xFB + 7 * i) % 256 for i in range(length))
    text = keys.b64url_encode(raw)
    assert "=" not in text
    assert keys.b64url_decode(text) == raw


def test_a_public_key_is_standard_base64_of_its_32_raw_bytes() -> None:
    public = keys.public_key_b64(Ed25519PrivateKey.from_private_bytes(RFC_SEED).public_key())
    assert public == PUBLIC_B64
    assert base64.b64decode(public, validate=True) == RFC_PUBLIC


@pytest.mark.parametrize(
    "spelling",
    [
        SEED_B64,  # standard, padded
        SEED_B64.rstrip("="),  # padding optional
        base64.urlsafe_b64encode(RFC_SEED).decode(),  # URL-safe
        base64.urlsafe_b64encode(RFC_SEED).decode().rstrip("="),
        f"  {SEED_B64}\n",  # as pasted into an environment file
    ],
)
def test_a_seed_is_read_in_any_base64_spelling(spelling: str) -> None:
    assert keys.public_key_of_seed(spelling) == PUBLIC_B64


def test_a_seed_whose_base64_has_both_url_unsafe_characters_reads_the_same_url_safe() -> None:
    seed = bytes([0xFB, 0xEF, 0xBE, 0xFF, 0xFF, 0xFF] * 5 + [1, 2])
    standard = base64.b64encode(seed).decode()
    assert {"+", "/"} <= set(standard)
    url_safe = base64.urlsafe_b64encode(seed).decode().rstrip("=")
    assert keys.public_key_of_seed(url_safe) == keys.public_key_of(seed)
    assert keys.public_key_of_seed(standard) == keys.public_key_of(seed)


@pytest.mark.parametrize("text", ["not base64!", "%%%%", SEED_B64[:-2] + "*="])
def test_a_seed_that_is_not_base64_is_a_named_configuration_error(text: str) -> None:
    with pytest.raises(ReceiptKeyInvalid, match=r"^the signing key seed is not base64: "):
        keys.private_key_from_seed(text)


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_a_seed_of_another_length_than_32_bytes_is_refused_with_its_length(length: int) -> None:
    text = base64.b64encode(bytes(length)).decode()
    with pytest.raises(ReceiptKeyInvalid) as caught:
        keys.private_key_from_seed(text)
    assert str(caught.value) == f"the signing key seed must be 32 bytes of base64, not {length}"


@pytest.mark.parametrize("length", [31, 33])
def test_encode_seed_takes_exactly_32_bytes(length: int) -> None:
    with pytest.raises(ValueError, match=r"^an Ed25519 seed is 32 bytes$"):
        keys.encode_seed(bytes(length))


def test_a_seed_from_text_is_the_base64_sha256_of_the_text() -> None:
    seed = keys.seed_from_text("vouch")
    assert base64.b64decode(seed) == hashlib.sha256(b"vouch").digest()
    assert keys.seed_from_text("vouch") == seed
    assert keys.seed_from_text("vouch2") != seed


def test_a_key_id_suggestion_names_the_environment_and_the_public_keys_digest() -> None:
    expected = "sandbox-" + hashlib.sha256(RFC_PUBLIC).hexdigest()[:12]
    assert keys.key_id_suggestion("sandbox", PUBLIC_B64) == expected
    assert len(expected) == len("sandbox-") + 12


@pytest.mark.parametrize("environment", ["production", "sandbox", "local-development"])
def test_a_generated_key_is_a_fresh_seed_with_its_public_key_and_id(environment: str) -> None:
    first = keys.key_generate(environment)
    assert set(first) == {"seed", "public_key", "key_id", "environment"}
    assert first["environment"] == environment
    assert len(base64.b64decode(first["seed"])) == 32
    assert first["public_key"] == keys.public_key_of_seed(first["seed"])
    assert first["key_id"] == keys.key_id_suggestion(environment, first["public_key"])
    assert keys.key_generate(environment)["seed"] != first["seed"]


@pytest.mark.parametrize("environment", ["", "staging", "Production", "local_development"])
def test_a_key_for_an_unknown_environment_is_not_generated(environment: str) -> None:
    with pytest.raises(ValueError, match="environment must be one of"):
        keys.key_generate(environment)


# --- configuration ---------------------------------------------------------------------------


def test_the_deployment_is_production_unless_configured_otherwise(settings: Any) -> None:
    del settings.VOUCH_ENVIRONMENT
    assert keys.deployment_environment() == "production"
    assert keys.deployment_livemode() is True
    settings.VOUCH_ENVIRONMENT = "sandbox"
    assert keys.deployment_environment() == "sandbox"
    assert keys.deployment_livemode() is False


def test_the_signing_key_as_configured(settings: Any) -> None:
    settings.RECEIPT_SIGNING_KEY = SEED_B64
    settings.RECEIPT_SIGNING_KEY_ID = "prod-1"
    settings.RECEIPT_SIGNING_ENVIRONMENT = "production"
    assert keys.signing_key_configured() is True
    signing = keys.signing_key()
    assert (signing.key_id, signing.environment, signing.public_key_b64) == (
        "prod-1",
        "production",
        PUBLIC_B64,
    )


@pytest.mark.parametrize("value", ["", None])
def test_no_signing_key_is_missing_not_invalid(settings: Any, value: Any) -> None:
    settings.RECEIPT_SIGNING_KEY = value
    assert keys.signing_key_configured() is False
    with pytest.raises(ReceiptKeyMissing) as caught:
        keys.signing_key()
    assert str(caught.value) == (  # the operator is told how to make one
        "Set RECEIPT_SIGNING_KEY (and RECEIPT_SIGNING_KEY_ID): "
        "`python manage.py receipt_keygen` makes one."
    )
    del settings.RECEIPT_SIGNING_KEY
    assert keys.signing_key_configured() is False


def test_settings_without_any_signing_key_entry_have_no_signing_key(settings: Any) -> None:
    del settings.RECEIPT_SIGNING_KEY
    with pytest.raises(ReceiptKeyMissing):
        keys.signing_key()


def test_a_signing_key_without_an_id_setting_is_invalid(settings: Any) -> None:
    settings.RECEIPT_SIGNING_KEY = SEED_B64
    del settings.RECEIPT_SIGNING_KEY_ID
    with pytest.raises(ReceiptKeyInvalid, match="RECEIPT_SIGNING_KEY_ID is empty"):
        keys.signing_key()


def test_a_signing_key_without_an_environment_setting_is_invalid(settings: Any) -> None:
    settings.RECEIPT_SIGNING_KEY = SEED_B64
    settings.RECEIPT_SIGNING_KEY_ID = "k1"
    del settings.RECEIPT_SIGNING_ENVIRONMENT
    with pytest.raises(ReceiptKeyInvalid, match="RECEIPT_SIGNING_ENVIRONMENT '' is not one of"):
        keys.signing_key()


def test_settings_without_a_trusted_keys_entry_trust_no_key(settings: Any) -> None:
    del settings.RECEIPT_TRUSTED_KEYS
    assert keys.trusted_keys() == {}


def test_a_signing_key_without_an_id_is_invalid(settings: Any) -> None:
    settings.RECEIPT_SIGNING_KEY = SEED_B64
    settings.RECEIPT_SIGNING_KEY_ID = ""
    with pytest.raises(ReceiptKeyInvalid, match="RECEIPT_SIGNING_KEY_ID is empty"):
        keys.signing_key()
    assert keys.configuration_problems() == [
        "RECEIPT_SIGNING_KEY_ID is empty: the signature must name its key"
    ]


@pytest.mark.parametrize(
    ("environment", "named"), [("", "''"), (None, "''"), ("staging", "'staging'")]
)
def test_a_signing_key_of_no_known_environment_is_invalid_and_names_it(
    settings: Any, environment: Any, named: str
) -> None:
    settings.RECEIPT_SIGNING_KEY = SEED_B64
    settings.RECEIPT_SIGNING_KEY_ID = "k1"
    settings.RECEIPT_SIGNING_ENVIRONMENT = environment
    with pytest.raises(ReceiptKeyInvalid) as caught:
        keys.signing_key()
    assert str(caught.value) == (
        f"RECEIPT_SIGNING_ENVIRONMENT {named} is not one of "
        "['local-development', 'production', 'sandbox']"
    )


def test_the_trusted_keys_as_configured(settings: Any) -> None:
    settings.RECEIPT_TRUSTED_KEYS = {
        "k1": {"public_key": PUBLIC_B64, "environment": "production"},
        "k2": {
            "public_key": keys.public_key_of_seed(keys.seed_from_text("2")),
            "environment": "sandbox",
        },
    }
    trusted = keys.trusted_keys()
    assert sorted(trusted) == ["k1", "k2"]
    assert (trusted["k1"].key_id, trusted["k1"].environment) == ("k1", "production")
    assert keys.public_key_b64(trusted["k1"].public_key) == PUBLIC_B64
    assert trusted["k2"].environment == "sandbox"


@pytest.mark.parametrize("configured", [None, {}])
def test_no_trusted_keys_is_an_empty_set(settings: Any, configured: Any) -> None:
    settings.RECEIPT_TRUSTED_KEYS = configured
    assert keys.trusted_keys() == {}


@pytest.mark.parametrize(
    ("configured", "message"),
    [
        ([["k1", PUBLIC_B64]], "RECEIPT_TRUSTED_KEYS must map key ids to"),
        ({"k1": PUBLIC_B64}, "RECEIPT_TRUSTED_KEYS['k1'] must be a mapping"),
        (
            {"k1": {"public_key": PUBLIC_B64, "environment": "staging"}},
            "RECEIPT_TRUSTED_KEYS['k1'].environment 'staging' is not one of",
        ),
        ({"k1": {"public_key": PUBLIC_B64}}, "RECEIPT_TRUSTED_KEYS['k1'].environment '' is not"),
        (
            {"k1": {"environment": "sandbox"}},
            "RECEIPT_TRUSTED_KEYS['k1'] must be 32 bytes of base64, not 0",
        ),
        (
            {"k1": {"public_key": "***", "environment": "sandbox"}},
            "RECEIPT_TRUSTED_KEYS['k1'] is not base64",
        ),
        (
            {"k1": {"public_key": PUBLIC_B64[:20], "environment": "sandbox"}},
            "RECEIPT_TRUSTED_KEYS['k1'] must be 32 bytes of base64, not 15",
        ),
    ],
)
def test_a_trusted_key_that_cannot_be_read_is_named(
    settings: Any, configured: Any, message: str
) -> None:
    settings.RECEIPT_TRUSTED_KEYS = configured
    with pytest.raises(ReceiptKeyInvalid) as caught:
        keys.trusted_keys()
    assert str(caught.value).startswith(message)
    assert [p[: len(message)] for p in keys.configuration_problems()] == [message]


def test_a_sound_configuration_has_no_problems(settings: Any) -> None:
    settings.RECEIPT_SIGNING_KEY = SEED_B64
    settings.RECEIPT_SIGNING_KEY_ID = "k1"
    settings.RECEIPT_SIGNING_ENVIRONMENT = "sandbox"
    _trust(settings, environment="sandbox")
    assert keys.configuration_problems() == []


def test_no_signing_key_is_not_a_configuration_problem(settings: Any) -> None:
    """Without a signing key the deployment writes no receipts (and says so in its log)."""
    settings.RECEIPT_SIGNING_KEY = ""
    settings.RECEIPT_SIGNING_KEY_ID = ""
    assert keys.configuration_problems() == []


def test_every_problem_is_reported_at_once(settings: Any) -> None:
    settings.RECEIPT_SIGNING_KEY = SEED_B64
    settings.RECEIPT_SIGNING_KEY_ID = "k1"
    settings.RECEIPT_SIGNING_ENVIRONMENT = "staging"
    settings.RECEIPT_TRUSTED_KEYS = {"k1": "not a mapping"}
    settings.VOUCH_ENVIRONMENT = "moon"
    problems = keys.configuration_problems()
    assert len(problems) == 3
    assert problems[0].startswith("RECEIPT_SIGNING_ENVIRONMENT 'staging' is not one of")
    assert problems[1] == "RECEIPT_TRUSTED_KEYS['k1'] must be a mapping"
    assert problems[2] == (
        "VOUCH_ENVIRONMENT 'moon' is not one of ['local-development', 'production', 'sandbox']"
    )


# --- trust -----------------------------------------------------------------------------------


@pytest.mark.parametrize("environment", ["production", "sandbox"])
def test_a_good_signature_by_a_configured_key_of_this_deployment_is_trusted(
    settings: Any, environment: str
) -> None:
    _trust(settings, environment=environment, deployment=environment)
    result = keys.signature_verify(message=MESSAGE, signature=_sign(), key_id="k1")
    assert result == keys.TrustResult(keys.TrustCode.TRUSTED, "k1", environment)
    assert result.ok is True


def test_a_key_id_that_is_not_configured_is_unknown(settings: Any) -> None:
    _trust(settings, environment="sandbox")
    result = keys.signature_verify(message=MESSAGE, signature=_sign(), key_id="k2")
    assert result == keys.TrustResult(keys.TrustCode.UNKNOWN_KEY, "k2", None)
    assert result.ok is False


@pytest.mark.parametrize(
    "signature",
    [
        _sign(b"another message"),  # a real signature, of something else
        _sign()[:-4] + "AAAA",  # altered
        _sign()[:40],  # truncated
        "",
        "!!!not base64!!!",
        "A",  # not a whole number of bytes in base64
    ],
)
def test_a_signature_that_does_not_verify_is_bad(settings: Any, signature: str) -> None:
    _trust(settings, environment="sandbox")
    result = keys.signature_verify(message=MESSAGE, signature=signature, key_id="k1")
    assert result == keys.TrustResult(keys.TrustCode.BAD_SIGNATURE, "k1", "sandbox")
    assert result.ok is False


def test_a_changed_message_does_not_verify(settings: Any) -> None:
    _trust(settings, environment="sandbox")
    result = keys.signature_verify(message=MESSAGE + b" ", signature=_sign(), key_id="k1")
    assert result.code is keys.TrustCode.BAD_SIGNATURE


@pytest.mark.parametrize("deployment", ["production", "sandbox", "local-development"])
def test_a_local_development_key_is_never_trusted(settings: Any, deployment: str) -> None:
    _trust(settings, environment="local-development", deployment=deployment)
    result = keys.signature_verify(message=MESSAGE, signature=_sign(), key_id="k1")
    assert result == keys.TrustResult(
        keys.TrustCode.LOCAL_DEVELOPMENT_KEY, "k1", "local-development"
    )
    assert result.ok is False


@pytest.mark.parametrize(
    ("configured", "deployment"), [("sandbox", "production"), ("production", "sandbox")]
)
def test_a_key_of_another_environment_than_the_deployments_is_a_mismatch(
    settings: Any, configured: str, deployment: str
) -> None:
    _trust(settings, environment=configured, deployment=deployment)
    result = keys.signature_verify(message=MESSAGE, signature=_sign(), key_id="k1")
    assert result == keys.TrustResult(keys.TrustCode.ENVIRONMENT_MISMATCH, "k1", configured)
    assert result.ok is False


def test_a_bad_signature_is_reported_before_the_keys_environment(settings: Any) -> None:
    """Whatever the key's environment, a signature that does not verify is `bad_signature`:
    a forged receipt is never described as merely from another environment."""
    for environment in ("local-development", "production"):
        _trust(settings, environment=environment, deployment="sandbox")
        result = keys.signature_verify(message=MESSAGE, signature=_sign(b"x"), key_id="k1")
        assert result.code is keys.TrustCode.BAD_SIGNATURE


def test_every_trust_code_is_a_stable_string() -> None:
    assert {code.value for code in keys.TrustCode} == {
        "trusted",
        "unknown_key",
        "bad_signature",
        "environment_mismatch",
        "local_development_key",
        "digest_mismatch",
    }
    assert set(keys.ENVIRONMENTS) == {"production", "sandbox", "local-development"}
