"""Signatures and trust (SPEC §8): trust comes from the CONFIGURED keys of this deployment's
environment, never from what a receipt says about itself. A key not configured fails; a key of
another environment is untrusted; a local-development key is never trusted, even if configured;
a tampered receipt fails its digest or its signature."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from receipts import keys
from receipts.canonical import canonical_bytes, receipt_id_of
from receipts.models import Receipt
from receipts.selectors import receipt_tree, receipt_verify

from .conftest import Shop, charge_receipt, sign_with

pytestmark = pytest.mark.django_db


def test_the_fixed_sandbox_key_of_the_test_settings_is_trusted(shop: Shop, settings: Any) -> None:
    receipt = charge_receipt(shop.fund())
    check = receipt_verify(receipt)
    assert (check.ok, check.problem) == (True, None)
    # The key is derived from a constant: every process of a test run signs with it.
    seed = keys.seed_from_text("vouch test receipt signing key (sandbox)")
    assert seed == settings.RECEIPT_SIGNING_KEY
    trusted = settings.RECEIPT_TRUSTED_KEYS["test-sandbox-1"]
    assert trusted == {
        "public_key": keys.public_key_of_seed(settings.RECEIPT_SIGNING_KEY),
        "environment": "sandbox",
    }
    result = keys.signature_verify(
        message=receipt.canonical.encode(), signature=receipt.signature, key_id=receipt.key_id
    )
    assert (result.code, result.environment) == (keys.TrustCode.TRUSTED, "sandbox")


def test_a_key_that_is_not_configured_is_unknown(shop: Shop, settings: Any) -> None:
    sign_with(settings, key_id="stray-1", environment="sandbox", trusted_as=None)
    charge_id = shop.fund()
    receipt = charge_receipt(charge_id)
    assert (receipt.key_id, receipt.key_environment) == ("stray-1", "sandbox")
    assert receipt_verify(receipt).problem == "unknown_key"
    tree = receipt_tree(charge_id=charge_id)
    assert not tree.complete
    assert tree.problems == [f"{receipt.id}: unknown_key"]


def test_the_receipts_own_claim_about_its_key_is_not_believed(shop: Shop, settings: Any) -> None:
    receipt = charge_receipt(shop.fund())
    settings.RECEIPT_TRUSTED_KEYS = {}  # this deployment no longer trusts the key
    assert receipt.key_environment == "sandbox"  # what the receipt says about itself
    assert receipt_verify(receipt).problem == "unknown_key"


def test_a_trusted_key_of_another_environment_is_untrusted(shop: Shop, settings: Any) -> None:
    sign_with(settings, key_id="prod-1", environment="production", trusted_as="production")
    charge_id = shop.fund()
    receipt = charge_receipt(charge_id)
    assert receipt_verify(receipt).problem == "environment_mismatch"  # a sandbox deployment
    assert not receipt_tree(charge_id=charge_id).complete
    settings.VOUCH_ENVIRONMENT = "production"  # the same receipt, read by a production deployment:
    # the key is trusted now, but the receipt is of a test-mode object (test_livemode).
    assert receipt_verify(receipt).problem == "livemode_mismatch"


def test_a_key_configured_under_another_environment_than_it_claims(
    shop: Shop, settings: Any
) -> None:
    # Signed by a key that calls itself `sandbox`, but configured here as a production key: the
    # configuration decides.
    sign_with(settings, key_id="mislabelled", environment="sandbox", trusted_as="production")
    receipt = charge_receipt(shop.fund())
    assert receipt.key_environment == "sandbox"
    assert receipt_verify(receipt).problem == "environment_mismatch"


def test_a_local_development_key_is_never_trusted(shop: Shop, settings: Any) -> None:
    sign_with(
        settings,
        key_id="dev-laptop",
        environment="local-development",
        trusted_as="local-development",
    )
    settings.VOUCH_ENVIRONMENT = "local-development"  # not even by a local-development deployment
    charge_id = shop.fund()
    receipt = charge_receipt(charge_id)
    assert receipt.key_environment == "local-development"
    check = receipt_verify(receipt)
    assert (check.ok, check.problem) == (False, "local_development_key")
    settings.VOUCH_ENVIRONMENT = "sandbox"
    tree = receipt_tree(charge_id=charge_id)
    assert not tree.complete
    assert tree.problems == [f"{receipt.id}: local_development_key"]


def test_the_local_settings_sign_with_a_local_development_key(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RECEIPT_", "VOUCH_ENV"))}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", VOUCH_VAR_DIR=str(tmp_path))
    env.pop("DATABASE_URL", None)
    script = (
        "import django, json; django.setup(); from receipts import keys; k = keys.signing_key(); "
        "print(json.dumps([k.key_id, k.environment, keys.deployment_environment(), "
        "sorted(keys.trusted_keys())]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["local-development", "local-development", "sandbox", []]


def _copy(receipt: Receipt, **changes: Any) -> Receipt:
    """A modified copy in memory: the stored row cannot be changed (test_immutability)."""
    forged = copy.copy(receipt)
    forged.body = copy.deepcopy(receipt.body)
    for name, value in changes.items():
        setattr(forged, name, value)
    return forged


def test_a_tampered_receipt_fails_its_digest_or_its_signature(shop: Shop) -> None:
    receipt = charge_receipt(shop.fund(10_000_000))
    assert receipt_verify(receipt).ok

    # The canonical text changed (a bigger amount), nothing else: the digest no longer matches.
    inflated = receipt.canonical.replace('"amount_micro":10000000', '"amount_micro":99000000')
    assert inflated != receipt.canonical
    assert receipt_verify(_copy(receipt, canonical=inflated)).problem == "digest_mismatch"

    # Body, canonical text, column and id all changed consistently: the signature does not cover
    # the new bytes.
    body = copy.deepcopy(receipt.body)
    body["amount_micro"] = 99_000_000
    canonical = canonical_bytes(body)
    forged = _copy(
        receipt,
        body=body,
        canonical=canonical.decode(),
        id=receipt_id_of(canonical),
        amount_micro=99_000_000,
    )
    assert receipt_verify(forged).problem == "bad_signature"

    # A column that says something else than the signed body.
    assert receipt_verify(_copy(receipt, amount_micro=99_000_000)).problem == "digest_mismatch"
    # The body changed behind the canonical text.
    edited = _copy(receipt)
    edited.body["detail"]["status"] = "failed"
    assert receipt_verify(edited).problem == "digest_mismatch"
    # Another signature, or garbage.
    other = receipt.signature[:-4] + ("AAAA" if not receipt.signature.endswith("AAAA") else "BBBB")
    assert receipt_verify(_copy(receipt, signature=other)).problem == "bad_signature"
    assert receipt_verify(_copy(receipt, signature="!!")).problem == "bad_signature"


def test_a_receipt_without_native_detail_is_not_complete(shop: Shop) -> None:
    receipt = charge_receipt(shop.fund())
    key = keys.signing_key()
    body = copy.deepcopy(receipt.body)
    body["detail"] = {}
    canonical = canonical_bytes(body)
    bare = _copy(
        receipt,
        body=body,
        canonical=canonical.decode(),
        id=receipt_id_of(canonical),
        signature=key.sign(canonical),
    )
    assert receipt_verify(bare).problem == "detail_missing"


def test_make_run_creates_a_sandbox_key_once_and_trusts_it(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from ops.management.commands.run_local import Command

    monkeypatch.delenv("RECEIPT_SIGNING_KEY", raising=False)
    settings.VAR_DIR = tmp_path
    command = Command(stdout=io.StringIO())
    env = command._receipt_key_env()
    assert (tmp_path / "receipt-signing-key.json").stat().st_mode & 0o777 == 0o600
    assert command._receipt_key_env() == env  # reused, not replaced
    assert env["RECEIPT_SIGNING_ENVIRONMENT"] == env["VOUCH_ENVIRONMENT"] == "sandbox"
    trusted = json.loads(env["RECEIPT_TRUSTED_KEYS"])
    key_id = env["RECEIPT_SIGNING_KEY_ID"]
    assert trusted[key_id] == {
        "public_key": keys.public_key_of_seed(env["RECEIPT_SIGNING_KEY"]),
        "environment": "sandbox",
    }
    # What the processes it starts then do: sign with it, and trust it.
    settings.RECEIPT_SIGNING_KEY = env["RECEIPT_SIGNING_KEY"]
    settings.RECEIPT_SIGNING_KEY_ID = key_id
    settings.RECEIPT_SIGNING_ENVIRONMENT = "sandbox"
    settings.RECEIPT_TRUSTED_KEYS = trusted
    signature = keys.signing_key().sign(b"body")
    result = keys.signature_verify(message=b"body", signature=signature, key_id=key_id)
    assert result.ok
    # A key set in the environment is left alone.
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", "set-by-the-operator")
    assert command._receipt_key_env() == {}
