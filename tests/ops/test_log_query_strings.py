"""No log line keeps a query string's values (docs/operations/logs.md): a token wrongly put in a
URL (`/metrics?token=…`) must not be written down. The names stay, each value is written
`[dropped]`: django-structlog's request lines, Django's security and runserver lines, and
gunicorn's access log (the repository's gunicorn.conf.py)."""

import logging
import os
import runpy
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from django.test import Client

from tests.crashes import database_url
from tests.drivers.logs import LogTap
from tests.helpers import free_port

from .conftest import _read, _stop

ROOT = Path(__file__).resolve().parents[2]
SECRET = "secret-value"


@pytest.fixture
def django_tap(log_tap: LogTap) -> Iterator[LogTap]:
    """`log_tap`, seeing Django's loggers too: they write to the same handler, not to the root."""
    loggers = [logging.getLogger(name) for name in ("django", "django.server")]
    for logger in loggers:
        logger.addHandler(log_tap.handler)
    try:
        yield log_tap
    finally:
        for logger in loggers:
            logger.removeHandler(log_tap.handler)


def _assert_dropped(text: str) -> None:
    assert text
    assert SECRET not in text, text
    assert "token=[dropped]" in text, text


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        f"/metrics?token={SECRET}",
        f"/api/v1/me?limit=5&token={SECRET}&flag",
        f"/api/v1/nowhere?token={SECRET}",
        f"/healthz?token={SECRET}",
    ],
)
def test_a_request_line_keeps_the_query_names_not_the_values(log_tap: LogTap, path: str) -> None:
    log_tap.clear()
    Client().get(path)
    _assert_dropped(log_tap.text())
    requests_logged = [r["request"] for r in log_tap.records() if "request" in r]
    assert requests_logged
    for line in requests_logged:
        assert line.startswith("GET " + path.split("?")[0] + "?")


@pytest.mark.django_db
def test_djangos_security_line_drops_the_values(django_tap: LogTap) -> None:
    django_tap.clear()
    client = Client(raise_request_exception=False)
    # A host Django refuses: django.security's line carries the request (its repr is the URL).
    client.get(f"/metrics?token={SECRET}", HTTP_HOST="evil.example")
    (security,) = [
        r for r in django_tap.records() if r["logger"] == "django.security.DisallowedHost"
    ]
    assert security["request"] == "GET /metrics?token=[dropped]"
    _assert_dropped(django_tap.text())


def test_runservers_access_line_drops_the_values(django_tap: LogTap) -> None:
    django_tap.clear()
    logging.getLogger("django.server").error(
        '"%s" %s %s', f"GET /metrics?token={SECRET}&a=b HTTP/1.1", 500, 12
    )
    (line,) = django_tap.records()
    assert line["event"] == '"GET /metrics?token=[dropped]&a=[dropped] HTTP/1.1" 500 12'


# --- gunicorn's access log -------------------------------------------------------------------


def _gunicorn_logger(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    from gunicorn.config import Config

    # The file makes a folder for this variable when it is unset: not in the test process.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    config = Config()
    for name in ("logger_class", "access_log_format"):
        if name in conf:
            config.set(name, conf[name])
    return config.logger_class(config)


def test_gunicorns_access_atoms_drop_the_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    logger = _gunicorn_logger(monkeypatch, tmp_path)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": f"/metrics?token={SECRET}&x",
        "PATH_INFO": "/metrics",
        "QUERY_STRING": f"token={SECRET}&x",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_REFERER": f"https://example.com/page?token={SECRET}",
    }
    request = SimpleNamespace(headers=[("REFERER", environ["HTTP_REFERER"])])
    response = SimpleNamespace(status="200 OK", sent=2, headers=[])
    atoms = logger.atoms(response, request, environ, timedelta(milliseconds=3))
    assert atoms["r"] == "GET /metrics?token=[dropped]&x HTTP/1.1"
    assert atoms["U"] == "/metrics"
    assert atoms["q"] == "token=[dropped]&x"
    assert atoms["f"] == "https://example.com/page?token=[dropped]"
    assert atoms["{referer}i"] == atoms["f"]
    line = logger.cfg.access_log_format % atoms
    _assert_dropped(line)
    assert SECRET not in repr(atoms)


def test_gunicorn_with_the_repositorys_config_writes_no_query_value(tmp_path: Path) -> None:
    port = free_port()
    access_log, error_log = tmp_path / "access.log", tmp_path / "error.log"
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application",
        "--config", str(ROOT / "gunicorn.conf.py"), "--workers", "1",
        "--bind", f"127.0.0.1:{port}", "--access-logfile", str(access_log),
        "--error-logfile", str(error_log),
    ]  # fmt: skip
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(),
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        command, cwd=ROOT, env=environment, start_new_session=True, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "gunicorn exited:\n" + _read(error_log)
            try:
                response = requests.get(
                    f"http://127.0.0.1:{port}/healthz?token={SECRET}",
                    headers={"Referer": f"http://x/?token={SECRET}"},
                    timeout=10,
                )
                if response.ok:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "gunicorn did not answer:\n" + _read(error_log)
            time.sleep(0.2)
        deadline = time.monotonic() + 10
        while "healthz" not in _read(access_log) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        _stop(process)
    text = _read(access_log)
    assert "/healthz?token=[dropped]" in text, text
    assert SECRET not in text + _read(error_log)
