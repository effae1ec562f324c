"""Issue 38 items 3 and 4: `ops.logs.secrets_redacted`, the one function every log line passes
through (the formatter of Django's LOGGING, gunicorn's and uvicorn's access and error logs): a
secret in a URL's path (a route whose parameter is a key or a token, read from the URL conf) is
written `[redacted]`, a query's values `[dropped]`."""

import logging
import sys

import pytest

from ops.logs import secret_path_routes, secrets_redacted
from tests.drivers.logs import LogTap

RESET = "/accounts/password/reset/key/1-dj7kqz-91c3cf0b1c85d8232a69e2734e629397/"
CONFIRM = "/accounts/confirm-email/Mg:1xaUUW:0prWzpkDTanQUScRGQuMDoBOvO36-d5EZseajYFTfUY/"


def test_the_tokened_routes_come_from_the_url_conf() -> None:
    """Issue 38 item 3: allauth's reset and confirmation routes are found by their parameter
    names (`key`), not listed by hand: a new route with a `<token>` is covered too."""
    routes = secret_path_routes()
    assert "accounts/^password/reset/key/(?P<uidb36>[0-9A-Za-z]+)-(?P<key>.+)/$" in routes
    assert r"accounts/^confirm-email/(?P<key>[-:\w]+)/$" in routes
    assert not any("envelope_id" in route or "object_id" in route for route in routes)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"GET {RESET}", "GET /accounts/password/reset/key/[redacted]/"),
        (f"GET {CONFIRM}", "GET /accounts/confirm-email/[redacted]/"),
        (f'1.2.3.4:5 - "GET {RESET} HTTP/1.1" 302',
         '1.2.3.4:5 - "GET /accounts/password/reset/key/[redacted]/ HTTP/1.1" 302'),
        (f"GET {CONFIRM}?next=/x", "GET /accounts/confirm-email/[redacted]/?next=[dropped]"),
        # The page the key is swapped for holds none, but has the route's shape: redacted too.
        ("GET /accounts/password/reset/key/1-set-password/",
         "GET /accounts/password/reset/key/[redacted]/"),
        ("GET /metrics?token=abc&x", "GET /metrics?token=[dropped]&x"),
        ("GET /escrow/envelopes/env_123/", "GET /escrow/envelopes/env_123/"),
    ],
)  # fmt: skip
def test_a_path_or_a_request_line_keeps_no_secret(text: str, expected: str) -> None:
    """Issue 38 items 3 and 4."""
    assert secrets_redacted(text) == expected


def test_a_full_url_in_free_text_keeps_no_secret() -> None:
    """Issue 38 item 3: an e-mail's body, an exception's message: the URL is found in text."""
    text = (
        "Hello,\nreset it at https://vouch.example.com" + RESET + " (valid 3 days).\n"
        "Confirm at http://127.0.0.1:8000" + CONFIRM + "\nor https://x.example/o/authorize/?"
        "code=abc&state=def."
    )
    redacted = secrets_redacted(text)
    assert "91c3cf0b1c85d8232a69e2734e629397" not in redacted
    assert "0prWzpkDTanQUScRGQuMDoBOvO36" not in redacted
    assert "code=abc" not in redacted
    assert "state=def" not in redacted
    assert "https://vouch.example.com/accounts/password/reset/key/[redacted]/ (valid" in redacted
    assert "http://127.0.0.1:8000/accounts/confirm-email/[redacted]/\n" in redacted


@pytest.mark.django_db
def test_every_field_of_a_line_is_redacted(log_tap: LogTap) -> None:
    """Issue 38 item 3: a foreign record's message, its extras and its traceback."""
    log_tap.clear()
    logger = logging.getLogger("vouch.tests")
    try:
        raise ValueError(f"no page at {RESET}")
    except ValueError:
        logger.exception("failed %s", CONFIRM, extra={"url": f"http://h{RESET}?token=abc"})
    text = log_tap.text()
    assert "91c3cf0b1c85d8232a69e2734e629397" not in text, text
    assert "0prWzpkDTanQUScRGQuMDoBOvO36" not in text, text
    assert "token=abc" not in text, text
    (record,) = log_tap.records()
    assert record["event"] == "failed /accounts/confirm-email/[redacted]/"
    assert "/accounts/password/reset/key/[redacted]/" in record["exception"]


def test_make_runs_console_lines_keep_no_secret() -> None:
    """Issue 38 item 3: under `make run` (the console renderer, coloured) the message and the
    traceback are redacted too."""
    from ops.logs import logging_config

    config = logging_config(renderer="console", level="INFO")["formatters"]["structured"]
    formatter = config["()"](
        processors=config["processors"], foreign_pre_chain=config["foreign_pre_chain"]
    )
    try:
        raise ValueError(f"no page at {CONFIRM}")
    except ValueError:
        record = logging.getLogger("vouch.tests").makeRecord(
            "vouch.tests", logging.ERROR, __file__, 1, "GET %s?token=abc", (RESET,), sys.exc_info()
        )
    line = formatter.format(record)
    assert "91c3cf0b1c85d8232a69e2734e629397" not in line, line
    assert "0prWzpkDTanQUScRGQuMDoBOvO36" not in line, line
    assert "token=abc" not in line, line
    assert "/accounts/password/reset/key/[redacted]/?token=[dropped]" in line, line
