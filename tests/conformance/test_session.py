"""The conformance suite fails a run (issue 36, acceptance 2): a pytest session whose adapter
sends a parameter the SDK does not declare, or whose sandbox answers an object without a field the
SDK declares, ends with exit status 1 and names the violation, though every test in it passed;
the same session without the fault ends green. Each case is a session of its own (the child files
in tests/conformance/sessions/)."""

import os
import subprocess
import sys

import pytest

from stripe_contract import LOG_ENV
from tests.conformance.plugin import ROOT


def _session(child: str, case: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != LOG_ENV}  # the child keeps its own log
    env["CONFORMANCE_CASE"] = case
    return subprocess.run(
        [sys.executable, "-m", "pytest", f"tests/conformance/sessions/{child}.py", "-q",
         "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("child", "case", "named"),
    [
        ("adapter_requests", "undeclared", "request POST /v1/refunds: vouch_note (unknown"),
        ("sandbox_objects", "missing", "object refund.currency (missing)"),
    ],
)
def test_a_session_with_a_violation_fails_though_its_tests_pass(
    child: str, case: str, named: str
) -> None:
    run = _session(child, case)
    assert " passed" in run.stdout, run.stdout[-3000:]
    assert " failed" not in run.stdout.split("Stripe's contract")[0], run.stdout[-3000:]
    assert run.returncode == 1, run.stdout[-3000:]
    assert "FAILED: " in run.stdout
    assert named in run.stdout, run.stdout[-3000:]


@pytest.mark.parametrize("child", ["adapter_requests", "sandbox_objects"])
def test_the_same_session_without_the_fault_passes(child: str) -> None:
    run = _session(child, "none")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "0 distinct request violations from the adapter" in run.stdout
