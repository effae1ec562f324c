"""bench/soak.py's client and its judgement of replays (issue 28): a worker killed while it sent a
response body must not end the soak (the client sends the request again under its key), and a
replay is judged by what the API promises (SPEC §4), not by equal details."""

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from bench import soak


class _CutShort(http.server.BaseHTTPRequestHandler):
    """The first request gets a chunked body cut off mid-way (a worker killed while sending it);
    the next ones get the whole answer. Every Idempotency-Key seen is kept."""

    keys: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).keys.append(self.headers.get("Idempotency-Key", ""))
        if len(type(self).keys) == 1:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"40\r\n" + b'{"data": {"status": "ref')  # promised 64 bytes
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        body = json.dumps({"data": {"status": "refunded"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def cut_short() -> Iterator[str]:
    _CutShort.keys = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CutShort)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _op() -> soak.Op:
    return soak.Op(
        index=7, client=0, kind="refund", amount_micro=None, payment_method="pm_card_visa",
        slot=0, first_timeout_s=None, replay=False, fail_later=False, abandon=False,
    )  # fmt: skip


def test_a_body_cut_short_is_an_unknown_answer_sent_again_under_its_key(cut_short: str) -> None:
    with pytest.raises(requests.exceptions.ChunkedEncodingError):  # what the soak met
        requests.post(cut_short + "/x", json={}, timeout=5).json()
    _CutShort.keys = [_CutShort.keys[0]]  # the server still cuts the next first request
    _CutShort.keys = []
    buyer = soak.Buyer(0, cut_short, "", "", 1, "", set(), [])
    answer = buyer.send(_op(), requests.Session(), "/refund", {}, "soak-1-7", None)
    assert answer.status == 200
    assert json.loads(answer.body) == {"data": {"status": "refunded"}}
    assert answer.dropped == 1
    assert _CutShort.keys == ["soak-1-7", "soak-1-7"]


def _answer(status: int, body: str, replayed: bool = False) -> soak.Answer:
    return soak.Answer(_op(), status, body=body, replayed=replayed)


def test_a_stored_answer_must_come_back_byte_for_byte() -> None:
    first = _answer(200, '{"data": {"status": "refunded"}}')
    assert soak.replay_verdict(first, _answer(200, first.body, replayed=True)) == "identical"
    changed = soak.replay_verdict(first, _answer(200, '{"data": {}}', replayed=True))
    assert not changed.startswith(soak.REPLAY_KEPT)
    fresh = soak.replay_verdict(first, _answer(200, '{"data": {"status": "x"}}'))
    assert not fresh.startswith(soak.REPLAY_KEPT)  # a success evaluated again: a double refund


def test_a_refusal_not_stored_is_evaluated_again_and_may_differ() -> None:
    """The case that failed CI on thread interleaving: a refusal (422) is not stored, a debit
    changed the balance meanwhile, and the replay's details differ."""
    first = _answer(422, '{"error": {"code": "amount_exceeds_unspent", "unspent": 5}}')
    again = _answer(422, '{"error": {"code": "amount_exceeds_unspent", "unspent": 3}}')
    assert soak.replay_verdict(first, again) == "re-evaluated"
    assert soak.replay_verdict(first, _answer(0, "")).startswith("422 then no answer")


def test_a_replayed_refusal_that_differs_breaks_the_promise() -> None:
    first = _answer(402, '{"error": {"code": "card_declined"}}', replayed=False)
    again = _answer(402, '{"error": {"code": "card_declined", "x": 1}}', replayed=True)
    assert not soak.replay_verdict(first, again).startswith(soak.REPLAY_KEPT)


@pytest.mark.django_db
def test_a_refusal_evaluated_again_leaves_nothing_under_its_key_or_only_the_second_answer(
    django_user_model: Any,
) -> None:
    from core.models import IdempotencyRecord

    user = django_user_model.objects.create_user(username="soak-judge")
    refused = _answer(422, "{}")
    refused.key, refused.replay = "soak-1-1", "re-evaluated"
    refused.again = _answer(422, "{}")
    assert soak.refusal_traces([refused]) == []
    passed = _answer(422, "{}")
    passed.key, passed.replay = "soak-1-2", "re-evaluated"
    passed.again = _answer(200, '{"data": 1}')
    assert soak.refusal_traces([passed]) == ["op 7: its key does not hold the second answer"]
    record = {
        "user": user, "operation": "envelope.refund:env_x", "surface": "rest",
        "request_digest": "0" * 64,
        "running": False, "lease_until": "2026-01-01T00:00:00Z", "response_status": 200,
    }  # fmt: skip
    IdempotencyRecord.objects.create(key="soak-1-2", response_body='{"data": 1}', **record)
    assert soak.refusal_traces([passed]) == []
    IdempotencyRecord.objects.create(key="soak-1-1", response_body="{}", **record)
    assert soak.refusal_traces([refused]) == ["op 7: refused twice, yet its key holds an answer"]
