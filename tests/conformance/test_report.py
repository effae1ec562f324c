"""What a run records becomes the fidelity report (`python -m stripe_contract report`), the
violations of a sandbox in another process reach the session through the log, and the report is
written only for a run of the whole suite."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stripe_contract import KNOWN_GAPS, Recorder, Violation
from stripe_contract.examples import example
from stripe_contract.report import render
from tests.conformance.plugin import ROOT, whole_suite


def _recorded() -> Recorder:
    recorder = Recorder()
    refund = example("refund")
    refund["status"] = "succeeded"
    recorder.record_object(refund, expanded=[], where="GET /v1/refunds/{refund}")
    recorder.record_object(example("payment_method"), expanded=[])
    recorder.record_request("POST /v1/refunds", [], from_adapter=True)
    recorder.record_behaviour(
        "A refund larger than what remains is refused",
        "https://docs.stripe.com/api/refunds/create",
        "tests/x.py::test_over_refund",
        "passed",
    )
    return recorder


def test_the_report_shows_fields_per_resource_and_behaviours(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_recorded().report()))
    shown = subprocess.run(
        [sys.executable, "-m", "stripe_contract", "report", str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    refund = json.loads(path.read_text())["objects"]["resources"]["refund"]
    declared, returned = len(refund["declared"]), len(refund["returned"])
    assert declared > returned > 10
    share = f"{100 * returned / declared:.0f}%"
    # Of the declared fields not returned, those stripe_contract.known explains are apart.
    explained = {field for resource, field in KNOWN_GAPS if resource == "refund"}
    unexplained = set(refund["declared"]) - set(refund["returned"]) - explained
    gaps = len(unexplained)
    assert f"| `refund` | {declared} | {returned} | {share} | {gaps} | 1 | `succeeded` |" in shown
    # Each declared field not returned is listed, with why (here: no reason known, a defect).
    assert "| `refund` | `failure_reason` | not returned: a defect until explained |" in shown
    # PaymentMethod's `sepa_debit` is named by its own `type` enum: only on such a method. Such
    # fields share one row.
    [typed] = [
        line
        for line in shown.splitlines()
        if line.startswith("| `payment_method` | ") and " fields: " in line
    ]
    assert "`sepa_debit`" in typed
    assert typed.endswith(
        "each only on a payment_method of that type (its `type` enum names the field) |"
    )
    assert (
        "| A refund larger than what remains is refused | "
        "[api/refunds/create](https://docs.stripe.com/api/refunds/create) | matches (1 test) |"
    ) in shown
    assert "| `POST /v1/refunds` | 1 | 1 | 0 |" in shown


def test_a_subprocess_sandboxs_violations_reach_the_session(tmp_path: Path) -> None:
    log = tmp_path / "contract.jsonl"
    other = Recorder(str(log))
    refund = example("refund")
    del refund["amount"]
    other.record_object(refund, where="event refund.updated")
    other.record_request(
        "POST /v1/refunds", [Violation("bogus", "unknown", "…", "parameter_unknown")],
        from_adapter=True,
    )  # fmt: skip
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["object", "request"]
    for line in lines:  # as if written by another process
        line["pid"] = os.getpid() + 1
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    session = Recorder()
    assert session.failures() == []
    assert session.merge_log(str(log)) == 2
    assert session.failures() == [
        "object refund.amount (missing): Refund.amount is not Optional [x1, e.g. amount in "
        "event refund.updated]",
        "request POST /v1/refunds: bogus (unknown, parameter_unknown): … [x1]",
    ]
    assert Recorder().merge_log(str(tmp_path / "never-written.jsonl")) == 0


def _session(args: list[str], *, here: Path = ROOT, **options: Any) -> Any:
    defaults = {
        "keyword": "",
        "markexpr": "",
        "deselect": None,
        "lf": False,
        "ignore": ["tests/inspector"],  # the project's addopts
    }
    config = SimpleNamespace(
        args=args,
        args_source=pytest.Config.ArgsSource.ARGS if args else pytest.Config.ArgsSource.TESTPATHS,
        invocation_params=SimpleNamespace(dir=here),
        rootpath=ROOT,
        getini=lambda name: {
            "testpaths": ["tests"],
            "addopts": ["-ra", "--ignore=tests/inspector"],
        }[name],
        option=SimpleNamespace(**{**defaults, **options}),
    )
    return SimpleNamespace(config=config, shouldstop=False, testscollected=5000)


def test_only_a_run_of_the_whole_suite_writes_the_report() -> None:
    assert whole_suite(_session([]))  # `make test`: pytest with no paths, the test paths
    assert whole_suite(_session(["tests"]))
    assert whole_suite(_session(["."], here=ROOT / "tests"))
    assert not whole_suite(_session(["tests/conformance"]))
    assert not whole_suite(_session(["tests/conformance/test_report.py::test_x"]))
    assert not whole_suite(_session([str(ROOT / "tests")], keyword="refund"))
    assert not whole_suite(_session([str(ROOT / "tests")], markexpr="not slow"))
    assert not whole_suite(_session([str(ROOT / "tests")], lf=True))
    assert not whole_suite(  # an --ignore of one's own leaves part of the suite out
        _session([], ignore=["tests/inspector", "tests/disputes"])
    )
    stopped = _session([str(ROOT / "tests")])
    stopped.shouldstop = "exiting after the first failure"
    assert not whole_suite(stopped)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read"),  # no such file
        ("{", "is not a conformance report"),  # not JSON
        ("{}", "is not a conformance report"),  # JSON, not a report
    ],
)
def test_the_report_command_refuses_what_is_no_report_in_one_line(
    tmp_path: Path, content: str | None, said: str
) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    shown = subprocess.run(
        [sys.executable, "-m", "stripe_contract", "report", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert shown.returncode == 1
    assert shown.stdout == ""
    assert said in shown.stderr
    assert "Traceback" not in shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1


def test_a_declared_field_never_returned_without_a_reason_is_a_defect() -> None:
    """What fails a whole run (tests/conformance/plugin.py): the fields the report shows as "not
    returned: a defect until explained", and only those."""
    from stripe_contract.report import unexplained_gaps

    report = _recorded().report()
    gaps = unexplained_gaps(report)
    assert "refund.failure_reason" in gaps  # the example refund has no failure: never shown
    assert "charge.refunds" not in gaps  # includable, and no charge was recorded anyway
    assert not any(g.startswith("payment_method.sepa_debit") for g in gaps)  # by its type
    rendered = render(report)
    shown = [line for line in rendered.splitlines() if "a defect until explained" in line]
    assert sorted(f"{line.split('`')[1]}.{line.split('`')[3]}" for line in shown) == sorted(gaps)
    explained = dict(report)
    explained["known_gaps"] = [
        *report["known_gaps"],
        *({"resource": g.split(".")[0], "field": g.split(".")[1], "why": "w"} for g in gaps),
    ]
    assert unexplained_gaps(explained) == []
