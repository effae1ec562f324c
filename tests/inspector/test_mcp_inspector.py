"""The official MCP Inspector's CLI against /mcp (issue 26, acceptance 2): `tools/list`, a
successful call and an error call whose output shows Vouch's error code, with a buyer's token.
Node 22 and the Inspector are installed from the npm registry into .ci/node by `make inspector`
(`.ci/run` does it, then runs this folder); `make test` leaves this folder out, since a fresh
machine may have no npm."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from accounts.models import User
from tests.agents.oauth import issue_token
from tests.drivers.api import Api

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(os.environ.get("VOUCH_NODE_DIR", ROOT / ".ci" / "node"))
NODE = NODE_DIR / "node_modules" / ".bin" / "node"
INSPECTOR = (
    NODE_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher"
    / "build" / "index.js"
)  # fmt: skip

pytestmark = pytest.mark.django_db(transaction=True)


def inspector(url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    if not (NODE.exists() and INSPECTOR.exists()):
        pytest.fail(f"The MCP Inspector is not installed in {NODE_DIR}: run `make inspector`.")
    return subprocess.run(
        [
            str(NODE), str(INSPECTOR), "--cli", f"{url}/mcp", "--transport", "http",
            "--header", f"Authorization: Bearer {token}", *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{NODE.parent}:{os.environ.get('PATH', '')}"},
    )  # fmt: skip


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


def test_the_inspector_lists_calls_and_reads_an_error(asgi_server: str, alice: Api) -> None:
    envelope_id = alice.create(4_000_000)["envelope_id"]
    user = User.objects.get(pk=alice.user.pk)
    token = issue_token(user, resource=f"{asgi_server}/mcp")

    listed = inspector(asgi_server, token, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    names = {tool["name"] for tool in _json(listed)["tools"]}
    assert "envelope_get" in names
    assert "escalations_list" not in names  # a buyer's token

    called = inspector(
        asgi_server, token, "--method", "tools/call", "--tool-name", "envelope_get",
        "--tool-arg", f"envelope_id={envelope_id}",
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    answer = _json(called)
    assert answer.get("isError") in (None, False), answer
    assert answer["structuredContent"]["envelope_id"] == envelope_id

    failed = inspector(
        asgi_server, token, "--method", "tools/call", "--tool-name", "envelope_get",
        "--tool-arg", "envelope_id=env_does_not_exist",
    )  # fmt: skip
    output = failed.stdout + failed.stderr
    assert "not_found" in output, output
    assert "has_more" not in output  # no schema error in place of Vouch's
