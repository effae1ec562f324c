from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from verification.contracts import CONTRACTS_DIR, load_contract, load_contracts

REFUND = CONTRACTS_DIR / "stripe.refund.created.yaml"


def test_shipped_contracts_load() -> None:
    contracts = load_contracts()
    assert set(contracts) == {
        "stripe.refund.created",
        "stripe.dispute.filed",
        "stripe.dispute.filed_ce3",
        "stripe.dispute.appeal_filed",
        "stripe.charge.succeeded",
    }
    refund = contracts["stripe.refund.created"]
    assert [c.strategy for c in refund.correlation] == [
        "resource_id",
        "idempotency_key",
        "fingerprint",
    ]
    assert [c.name for c in refund.channels] == ["refund_readback", "refund_created_events"]
    assert [c.name for c in refund.verified] == [
        "refund_present",
        "refund_state_known",
        "refund_created_in_window",
    ]
    assert [c.class_ for c in refund.contradicted] == [
        "wrong subject", "wrong amount", "pre existing state", "duplicate side effect",
    ]  # fmt: skip
    assert [(r.name, r.verdict, r.class_) for r in refund.pre_completion] == [
        ("terminal_failure", "FAILED", None),
        ("canceled", "CONTRADICTED", "reversed"),
    ]
    timing = refund.timing
    assert (timing.initial_delay_ms, timing.poll_interval_ms, timing.max_attempts) == (
        1000,
        5000,
        40,
    )
    assert (timing.timeout_ms, timing.stale_read_window_ms) == (604_800_000, 20_000)
    # The reference: attempts run out after about 36 minutes.
    assert 35 * 60 < sum(timing.delay_before(k) for k in range(1, 41)) < 37 * 60


def _broken(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(REFUND.read_text())
    edit(data)
    path = tmp_path / "stripe.refund.created.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["verified"][0].update(operator="roughly"), "verified.0.operator"),
        (lambda d: d["verified"][0].update(path="observed.refund_readback.id"), "verified.0.path"),
        (lambda d: d["contradicted"][1].pop("class"), "contradicted.1.class"),
        (lambda d: d.pop("timing"), "timing: Field required"),
        (lambda d: d["timing"].update(max_attempts=0), "timing.max_attempts"),
        (lambda d: d["evidence"].update(min_level="E9"), "evidence.min_level"),
        (lambda d: d["verified"][1].update(expected="succeeded"), "needs a list"),
        (lambda d: d["verified"][0].update(path="$observed.nowhere.id"), "names no channel"),
        (lambda d: d["channels"][0].pop("read"), "needs `read`"),
        (lambda d: d.update(surprise=1), "surprise: Extra inputs are not permitted"),
        (lambda d: d["pre_completion"][0].update(verdict="VERIFIED"), "pre_completion.0.verdict"),
        (lambda d: d.update(provider="strype"), "provider: no provider 'strype'"),
        (
            lambda d: d["channels"][0]["read"].update(resource="refnd"),
            "channels.0.read.resource: stripe has no readable resource 'refnd'",
        ),
        (lambda d: d["channels"][1].update(verifier="carrier_pigeon"), "channels.1.verifier"),
    ],
)
def test_an_invalid_contract_names_file_and_field(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ImproperlyConfigured) as raised:
        load_contract(_broken(tmp_path, edit))
    assert str(raised.value).startswith("contract stripe.refund.created.yaml:")
    assert message in str(raised.value)


def test_file_name_must_match_id_and_yaml_must_parse(tmp_path: Path) -> None:
    renamed = tmp_path / "other.yaml"
    renamed.write_text(REFUND.read_text())
    with pytest.raises(ImproperlyConfigured, match="must match the file name"):
        load_contract(renamed)
    broken = tmp_path / "x.yaml"
    broken.write_text("id: [unclosed")
    with pytest.raises(ImproperlyConfigured, match="not valid YAML"):
        load_contract(broken)


def test_an_invalid_contract_stops_startup(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    _broken(tmp_path, lambda d: d["channels"][0].update(verifier="carrier_pigeon"))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    code = (
        "import django; from django.conf import settings; "
        f"settings.VERIFICATION_CONTRACT_DIRS = [{str(tmp_path)!r}]; django.setup()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert (
        "contract stripe.refund.created.yaml: channels.0.verifier: no verifier 'carrier_pigeon'"
        in result.stderr
    )


def test_an_unreadable_resource_stops_startup(tmp_path: Path) -> None:
    """A typo in what the http verifier reads fails at startup, not at every attempt forever."""
    import os
    import subprocess
    import sys

    _broken(tmp_path, lambda d: d["channels"][0]["read"].update(resource="refnd"))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    code = (
        "import django; from django.conf import settings; "
        f"settings.VERIFICATION_CONTRACT_DIRS = [{str(tmp_path)!r}]; django.setup()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert (
        "contract stripe.refund.created.yaml: channels.0.read.resource: stripe has no readable "
        "resource 'refnd'" in result.stderr
    )


def test_every_readable_resource_is_a_read_of_the_adapter() -> None:
    """The registry contracts are checked against names only reads the adapter really has."""
    from providers import StripeProvider
    from verification.verifiers import HttpVerifier

    assert set(HttpVerifier.READERS) == {"stripe"}
    for operation in HttpVerifier.READERS["stripe"].values():
        assert callable(getattr(StripeProvider, operation))
