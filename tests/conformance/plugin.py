"""The conformance suite's pytest side (SPEC §12.1): every request the sandbox received was checked
against the pinned SDK's Params type of its operation, every answer and event against its
resource class (stripe_sandbox/contract_checks.py records them in stripe_contract.RECORDER). At
the end of the session this plugin

- fails the run (exit status 1, with the list) when a request FROM THE ADAPTER (User-Agent
  "Vouch/…") departed from its Params type, or an object from its class: a test that passes
  against a sandbox Stripe disagrees with proves nothing;
- writes var/conformance/report.json (`python -m stripe_contract report` renders it) when the run
  was the whole suite: the default test paths, no -k, -m, --deselect, --lf/--ff, not stopped
  early. A partial run still fails on violations, and writes nothing (a report of a subset would
  under-state what the suite covers);
- fails a run of the whole suite, too, when a field the SDK declares was never returned and no
  reason is known (a row of stripe_contract/known.py, an includable field, or a field named by the
  resource's own `type` enum);
- gathers the outcome of each test marked `stripe_behaviour(rule, source=URL)`.

Sandboxes in subprocesses record too: STRIPE_CONTRACT_LOG names a file they append their
violations to, read back here."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from stripe_contract import LOG_ENV, RECORDER
from stripe_contract.report import unexplained_gaps

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "var" / "conformance" / "report.json"
_LOG = pytest.StashKey[str]()
_FAILURES = pytest.StashKey[list[str]]()
_WHOLE = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    handle, path = tempfile.mkstemp(prefix="stripe-contract-", suffix=".jsonl")
    os.close(handle)
    os.environ[LOG_ENV] = path  # inherited by the sandboxes the tests start in subprocesses
    config.stash[_LOG] = path
    RECORDER.start(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_LOG, None)
    if path is not None:
        Path(path).unlink(missing_ok=True)
        if os.environ.get(LOG_ENV) == path:
            del os.environ[LOG_ENV]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    marker = item.get_closest_marker("stripe_behaviour")
    if marker is not None and (report.when == "call" or not report.passed):
        rule = marker.kwargs.get("rule", marker.args[0] if marker.args else "")
        source = marker.kwargs.get("source", marker.args[1] if len(marker.args) > 1 else "")
        outcome = "error" if report.when != "call" and report.failed else report.outcome
        RECORDER.record_behaviour(rule, source, item.nodeid, outcome)
    return report


def whole_suite(session: pytest.Session) -> bool:
    """Whether this run is the suite as `make test` runs it, not a subset of it."""
    config = session.config
    option = config.option
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        default_paths = True
    else:  # paths given: the suite only if they are the test paths themselves
        here = Path(config.invocation_params.dir)
        given = sorted(str((here / arg.split("::")[0]).resolve()) for arg in config.args)
        default = sorted(str((config.rootpath / p).resolve()) for p in config.getini("testpaths"))
        default_paths = given == default and not any("::" in arg for arg in config.args)
    # `--ignore` beyond the project's own addopts (which leave out tests/inspector, run apart).
    configured = {
        arg.split("=", 1)[1] for arg in config.getini("addopts") if arg.startswith("--ignore=")
    }
    ignored = set(getattr(option, "ignore", None) or []) - configured
    return (
        default_paths
        and not ignored
        and not getattr(option, "ignore_glob", None)
        and not getattr(option, "keyword", "")
        and not getattr(option, "markexpr", "")
        and not getattr(option, "deselect", None)
        and not getattr(option, "lf", False)
        and not getattr(option, "failedfirst", False)
        and not getattr(option, "stepwise", False)
        and not getattr(option, "collectonly", False)
        and not session.shouldstop
        and session.testscollected > 0
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    RECORDER.merge_log(config.stash[_LOG])
    failures = RECORDER.failures()
    config.stash[_FAILURES] = failures
    config.stash[_WHOLE] = whole_suite(session)
    if config.stash[_WHOLE]:
        report = RECORDER.report()
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps(report, indent=1) + "\n")
        # What the whole suite never saw returned, with no reason known, is a defect too.
        failures += [
            f"declared field {field} never returned, and no reason known (stripe_contract/known.py)"
            for field in unexplained_gaps(report)
        ]
    if failures and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    failures = config.stash.get(_FAILURES, [])
    terminalreporter.section("Stripe's contract (SPEC §12.1)")
    terminalreporter.write_line(RECORDER.summary())
    if config.stash.get(_WHOLE, False):
        terminalreporter.write_line(
            f"Report: {REPORT.relative_to(ROOT)} (python -m stripe_contract report {REPORT})"
        )
    else:
        terminalreporter.write_line("A partial run: no report written.")
    if failures:
        terminalreporter.write_line(
            f"FAILED: {len(failures)} violations of the pinned SDK's types (requests from the "
            "adapter, objects the sandbox answered or emitted):",
            red=True,
        )
        for line in failures:
            terminalreporter.write_line(f"  {line}")
