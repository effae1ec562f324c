"""The demo walkthrough (docs/getting-started.md, which the README points to) runs as written:
every ```sh block between `<!-- demo:start -->` and `<!-- demo:end -->` is run in order, in one
bash, against a fresh `make run` (its addresses in BASE and SANDBOX), and each answer the blocks
keep in a variable is checked. The approval and the filing, which the page has a person do in the
admin as `ops` and `lead`, are done here by the same services the admin's review page calls, as
those users; then the page's readback block must show the packet filed and the submission at the
provider."""

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.test_smoke_run import ROOT, make_run

WALKTHROUGH = ROOT / "docs" / "getting-started.md"
VARIABLES = (
    "ME", "CREATED", "TOPPED", "ENVELOPE", "CHARGE", "LISTED", "ENVELOPE_READ", "REFUSED",
    "REFUNDED", "REFUND", "REFUNDS", "REFUND_READ", "VERIFICATION", "SECOND", "SECOND_CHARGE",
    "OUTSIDE", "DISPUTE", "RECORDED", "VOUCH_DISPUTE", "PACKET", "OPS_TOKEN",
)  # fmt: skip
# As the packet's review page in the admin does: `ops` approves the digest shown, `lead` files it.
APPROVE_AND_FILE = """
from accounts.models import User
from disputes.models import Packet
from disputes.services import filing_key_proposal, packet_approve, packet_file

packet = Packet.objects.get(public_id="{packet_id}")
packet = packet_approve(
    packet=packet, actor=User.objects.get(username="ops"), confirmed_digest=packet.digest
)
packet = packet_file(
    packet=packet,
    actor=User.objects.get(username="lead"),
    confirmed_digest=packet.digest,
    idempotency_key=filing_key_proposal(packet),
)
print("filing:", packet.filing_status)
"""
MARK = "__DEMO_VARIABLES__"


def demo_blocks(text: str) -> list[str]:
    """The sh blocks of the marked section, in order."""
    start, end = text.index("<!-- demo:start -->"), text.index("<!-- demo:end -->")
    blocks = re.findall(r"^```sh\n(.*?)^```$", text[start:end], flags=re.S | re.M)
    assert len(blocks) >= 6, "the walkthrough lost its blocks"
    return blocks


def readback_block(text: str) -> str:
    """The sh block after the marked section: the filing's readback, once a person filed."""
    after = text[text.index("<!-- demo:end -->") :]
    block = re.search(r"^```sh\n(.*?)^```$", after, flags=re.S | re.M)
    assert block is not None
    return block.group(1)


def _approve_and_file(env: dict[str, str], packet_id: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", APPROVE_AND_FILE.format(packet_id=packet_id)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "filing: " in done.stdout, done.stdout


def _readback(env: dict[str, str], found: dict[str, str]) -> list[Any]:
    """Run the walkthrough's readback block (its helpers and variables set) until the packet is
    filed; its two answers."""
    text = WALKTHROUGH.read_text()
    script = "\n".join(
        [
            "set -euo pipefail",
            demo_blocks(text)[0],  # the helpers
            *(
                f"{name}={shlex.quote(found[name])}"
                for name in ("OPS_TOKEN", "VOUCH_DISPUTE", "DISPUTE")
            ),
            readback_block(text),
        ]
    )
    deadline = time.monotonic() + 120
    while True:
        done = subprocess.run(
            ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if answers[0]["status"] == "filed" or time.monotonic() > deadline:
            return answers
        time.sleep(2)


def _run_demo(env: dict[str, str]) -> tuple[dict[str, str], str]:
    script = "\n".join(
        [
            "set -euo pipefail",
            "set -a",  # every variable the blocks set is exported, for the dump below
            *demo_blocks(WALKTHROUGH.read_text()),
            "python3 -c 'import json, os, sys; print(sys.argv[1] + json.dumps({k: os.environ.get(k) for k in sys.argv[2:]}))' "  # noqa: E501
            + MARK
            + " "
            + " ".join(VARIABLES),
        ]
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    return json.loads(line.removeprefix(MARK)), output


def _ok(raw: str | None) -> Any:
    body = json.loads(raw or "null")
    assert body["success"] is True, body
    return body["data"]


def test_the_demo_walkthrough_runs_against_make_run(tmp_path: Path) -> None:
    with make_run(tmp_path / "var", noreload=True) as run:
        env = {**run.env, "BASE": run.base, "SANDBOX": run.sandbox_url}
        found, output = _run_demo(env)
        provider = run.sandbox.state()
        _approve_and_file(env, json.loads(found["PACKET"] or "")["packet_id"])
        filing, evidence_details = _readback(env, found)
        log = run.log()

    # make run printed the three demo users.
    for user, password in (
        ("ops", "vouch-ops-demo"),
        ("lead", "vouch-lead-demo"),
        ("buyer", "vouch-buyer-demo"),
    ):
        assert re.search(rf"username {user}\s+password {password}", log), log[:3000]
    assert "sign-in: 302" in output

    me = _ok(found["ME"])
    assert (me["username"], me["auth_method"], me["email_verified"]) == ("buyer", "session", True)

    created = _ok(found["CREATED"])
    assert created["envelope_id"] == found["ENVELOPE"]
    assert created["total_funded_micro"] == 20_000_000
    assert created["funding_legs"][0]["charge"] == found["CHARGE"]
    topped = _ok(found["TOPPED"])
    assert topped["total_funded_micro"] == topped["unspent_micro"] == 25_000_000
    assert [leg["status"] for leg in topped["funding_legs"]] == ["succeeded", "succeeded"]
    top_up_charge = topped["funding_legs"][1]["charge"]

    listed = _ok(found["LISTED"])
    assert found["ENVELOPE"] in [e["envelope_id"] for e in listed["results"]]
    assert _ok(found["ENVELOPE_READ"])["unspent_micro"] == 25_000_000
    refused = json.loads(found["REFUSED"] or "")
    assert refused["success"] is False
    assert refused["error"]["code"] == "session_required"

    refunded = _ok(found["REFUNDED"])
    assert refunded["refund_id"] == found["REFUND"]
    assert (refunded["status"], refunded["refunded_micro"]) == ("refunded", 12_000_000)
    # Last in, first out: the whole top-up, then the original charge.
    assert [(leg["charge"], leg["amount_micro"]) for leg in refunded["legs"]] == [
        (top_up_charge, 5_000_000),
        (found["CHARGE"], 7_000_000),
    ]
    assert [r["refund_id"] for r in _ok(found["REFUNDS"])["results"]] == [found["REFUND"]]
    assert found["VERIFICATION"] == "verified"
    refund_read = _ok(found["REFUND_READ"])
    assert [leg["verification_verdict"] for leg in refund_read["legs"]] == ["VERIFIED"] * 2
    assert refund_read["balances"]["unspent_micro"] == 13_000_000

    # The outside refund is at the provider.
    assert json.loads(found["OUTSIDE"] or "")["status"] == "succeeded"
    assert provider["charges"][found["SECOND_CHARGE"]]["amount_refunded"] == 100
    # Vouch's refunds are at the provider, as the ledger says.
    assert provider["charges"][found["CHARGE"]]["amount_refunded"] == 700
    assert provider["charges"][top_up_charge]["amount_refunded"] == 500

    # The dispute reached Vouch and has a packet ready for an approver.
    assert found["DISPUTE"].startswith("dp_")
    (dispute,) = _ok(found["RECORDED"])["results"]
    assert dispute["provider_dispute_id"] == found["DISPUTE"]
    assert dispute["dispute_id"] == found["VOUCH_DISPUTE"]
    assert dispute["amount_micro"] == 7_000_000
    assert dispute["intended_submission_method"] == "manual"
    packet = json.loads(found["PACKET"] or "")
    assert packet["posture"] == "refund_already_sent", packet
    assert packet["validation"]["ok"] is True
    assert packet["contributors"] == []
    assert provider["charges"][found["CHARGE"]]["disputed"] is True

    # Approved by ops, filed by lead: filed once the readback run is VERIFIED, and submitted
    # by hand at the provider.
    assert filing["status"] == "filed", filing
    assert filing["verification_verdict"] == "VERIFIED"
    assert evidence_details["submission_count"] == 1
    assert evidence_details["submission_method"] == "manual"
