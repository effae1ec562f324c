"""`manage.py` commands run from the repository next to `make run` use the settings `make run`
uses: the sandbox it started (`STRIPE_API_BASE` given to `make run`, another port than the
default) and the receipt key it created under `var/` and trusts. Without that, `manage.py
reconcile` called the default port and signed its report with a `local-development` key nothing
trusts, and `--verify-report` refused reports the admin showed as verified (`unknown_key`).

The var directory is prepared as `make run` prepares it (`run_local.local_settings_prepare`), on
the test database (committed: the commands run in processes of their own) and the test sandbox,
whose port is never the default one; the commands get no Stripe or receipt variable."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envelopes.models import FundingLeg
from ops.management.commands.run_local import local_settings_prepare
from receipts import keys
from reconciliation.engine import reconcile
from reconciliation.models import Run
from reconciliation.runs import report_verify
from stripe_sandbox.client import SandboxControl
from tests.conftest import ROOT, _database_url
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db(transaction=True)

# What a shell next to `make run` does not have: `make run`'s own processes get these from it.
_MAKE_RUN_ONLY = ("STRIPE_", "RECEIPT_", "VOUCH_ENVIRONMENT", "DJANGO_SETTINGS_MODULE")


def manage(var_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """`python manage.py ARGS` as an operator types it beside `make run`: local settings, the
    same var directory, no Stripe or receipt variable (the test database in DATABASE_URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_MAKE_RUN_ONLY)}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",
        VOUCH_VAR_DIR=str(var_dir),
        DATABASE_URL=_database_url(),
        **extra,
    )
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def prepared_as_make_run(var_dir: Path, sandbox_url: str) -> dict[str, str]:
    """The var directory as `make run STRIPE_API_BASE=<sandbox_url>` leaves it; the environment
    its processes get."""
    return local_settings_prepare(
        var_dir, stripe_api_base=sandbox_url, environ={}, say=io.StringIO().write
    )


def test_manage_py_reconcile_uses_make_runs_sandbox_and_signs_a_report_it_verifies(
    alice: Api, stripe_at_sandbox: SandboxControl, tmp_path: Path
) -> None:
    assert not stripe_at_sandbox.url.endswith(":12111")
    data = alice.create(10_000_000)
    funding = FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)
    var_dir = tmp_path / "var"
    make_run_env = prepared_as_make_run(var_dir, stripe_at_sandbox.url)

    done = manage(var_dir, "reconcile", "--since", "1h")

    # It read the charge from make run's sandbox (the ledger's charge is there, and agrees).
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "No discrepancy" in done.stdout
    run = Run.objects.get()
    assert run.compared.get("charge") == 1
    pages = [o.body_bytes() or b"" for o in run.observations.filter(kind="charges")]
    assert any(funding.charge_id.encode() in page for page in pages)
    # It signed with the key make run created and trusts.
    assert run.report_key_id == make_run_env["RECEIPT_SIGNING_KEY_ID"]
    trusted = json.loads(make_run_env["RECEIPT_TRUSTED_KEYS"])
    assert trusted[run.report_key_id]["environment"] == "sandbox"

    verified = manage(var_dir, "reconcile", "--verify-report", run.public_id)
    assert verified.returncode == 0, (verified.stdout, verified.stderr)
    assert f"signed by {run.report_key_id}" in verified.stdout


def test_manage_py_verifies_a_report_make_runs_processes_signed(
    stripe_at_sandbox: SandboxControl, tmp_path: Path, settings: Any
) -> None:
    """A report signed by make run's worker (its environment) verifies with `manage.py
    reconcile --verify-report`, as the admin shows it."""
    var_dir = tmp_path / "var"
    make_run_env = prepared_as_make_run(var_dir, stripe_at_sandbox.url)
    settings.RECEIPT_SIGNING_KEY = make_run_env["RECEIPT_SIGNING_KEY"]
    settings.RECEIPT_SIGNING_KEY_ID = make_run_env["RECEIPT_SIGNING_KEY_ID"]
    settings.RECEIPT_SIGNING_ENVIRONMENT = make_run_env["RECEIPT_SIGNING_ENVIRONMENT"]
    settings.RECEIPT_TRUSTED_KEYS = json.loads(make_run_env["RECEIPT_TRUSTED_KEYS"])
    run = reconcile(kind="manual")
    assert run.report_key_id == make_run_env["RECEIPT_SIGNING_KEY_ID"]
    assert report_verify(run).ok  # as the admin, under make run's settings, shows it

    verified = manage(var_dir, "reconcile", "--verify-report", run.public_id)
    assert verified.returncode == 0, (verified.stdout, verified.stderr)


def test_environment_variables_still_win_over_make_runs_settings(
    stripe_at_sandbox: SandboxControl, tmp_path: Path
) -> None:
    var_dir = tmp_path / "var"
    prepared_as_make_run(var_dir, stripe_at_sandbox.url)
    elsewhere = "http://127.0.0.1:9"  # discard: nothing answers
    shown = manage(
        var_dir,
        "shell",
        "--verbosity=0",
        "-c",
        "from django.conf import settings; print(settings.STRIPE_API_BASE); "
        "print(settings.RECEIPT_SIGNING_KEY_ID)",
        STRIPE_API_BASE=elsewhere,
        RECEIPT_SIGNING_KEY_ID="operator-key",
        RECEIPT_SIGNING_KEY=keys.key_generate("sandbox")["seed"],
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [elsewhere, "operator-key"]


def test_make_run_writes_only_what_it_uses_readable_by_its_owner(tmp_path: Path) -> None:
    """With a real test-mode key, make run starts no sandbox: no sandbox address is written (the
    commands talk to Stripe as their own settings say). A signing key given to make run in its
    environment stays there: no key is written, and the keys it trusts are."""
    operator_trust = {"op-1": {"public_key": "AAAA", "environment": "sandbox"}}
    env = local_settings_prepare(
        tmp_path,
        stripe_api_base=None,
        environ={
            "RECEIPT_SIGNING_KEY": "set-by-the-operator",
            "RECEIPT_TRUSTED_KEYS": json.dumps(operator_trust),
        },
    )
    path = tmp_path / "local-settings.json"
    written = json.loads(path.read_text())
    assert env == {}
    assert "STRIPE_API_BASE" not in written
    assert "RECEIPT_SIGNING_KEY" not in written
    assert written["RECEIPT_TRUSTED_KEYS"] == operator_trust
    assert not (tmp_path / "receipt-signing-key.json").exists()

    # The sandbox and make run's own key: both written, for the owner's eyes only (the seed).
    env = local_settings_prepare(tmp_path, stripe_api_base="http://127.0.0.1:12999", environ={})
    written = json.loads(path.read_text())
    assert path.stat().st_mode & 0o777 == 0o600
    assert written["STRIPE_API_BASE"] == env["STRIPE_API_BASE"] == "http://127.0.0.1:12999"
    assert written["RECEIPT_SIGNING_KEY"] == env["RECEIPT_SIGNING_KEY"]
    assert written["RECEIPT_TRUSTED_KEYS"] == json.loads(env["RECEIPT_TRUSTED_KEYS"])
    assert set(tmp_path.iterdir()) == {tmp_path / "receipt-signing-key.json", path}
