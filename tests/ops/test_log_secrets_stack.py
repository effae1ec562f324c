"""Issue 38 items 3 and 4, acceptance 3: the stack as deployed writes no secret it was given.

gunicorn with uvicorn workers (`config.asgi`, the repository's gunicorn.conf.py, `--access-logfile
-`), a Celery worker and beat, all under the production settings on PostgreSQL, each process's
stdout and stderr kept in a file. Every kind of secret a person, a client or Stripe sends goes in:
in a URL's path and query, in a header, in a body. Each request's answer proves the secret reached
the application; then every log file is read and none of the secrets is found in any.

E-mail goes to a file backend (production refuses one unless EMAIL_BACKEND_INSECURE_OK=1 says it
is meant): the reset and confirmation links are read from the mail folder, which is not a log."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from accounts.models import User
from accounts.services import api_token_issue, email_address_verify
from config.celery_app import app
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import client_register, issue_token, pkce_pair
from tests.crashes import database_url
from tests.helpers import free_port

from .conftest import _read, _stop

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
METRICS_TOKEN = "metrics-" + secrets.token_hex(12)
WEBHOOK_SECRET = "whsec_" + secrets.token_hex(16)


class Stack:
    """The processes, their log files, and the mail folder."""

    def __init__(self, url: str, logs: Path, mail: Path) -> None:
        self.url = url
        self.logs = logs
        self.mail = mail

    def log_text(self) -> str:
        return "\n".join(_read(path) for path in sorted(self.logs.iterdir()))

    def mail_link(self, pattern: str, count: int) -> str:
        """The `count`-th link matching `pattern` in the mail folder (waits for it)."""
        deadline = time.monotonic() + 20
        while True:
            text = "\n".join(_read(path) for path in sorted(self.mail.glob("*")))
            links = re.findall(pattern, text)
            if len(links) >= count:
                return str(links[count - 1])
            assert time.monotonic() < deadline, f"no mail link {pattern}:\n{text}"
            time.sleep(0.2)


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.with_suffix(".out").open("w") as out, log.with_suffix(".err").open("w") as err:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, start_new_session=True, stdout=out, stderr=err
        )


@pytest.fixture
def stack(
    tmp_path: Path, sandbox: SandboxControl, celery_broker: str, transactional_db: None
) -> Iterator[Stack]:
    logs, mail = tmp_path / "logs", tmp_path / "mail"
    logs.mkdir()
    mail.mkdir()
    (tmp_path / "prometheus").mkdir()
    with app.connection_for_write() as broker:
        for queue in app.conf.task_queues or ():
            broker.default_channel.queue_purge(queue.name)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "STRIPE_"))},
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": celery_broker,
        "CACHE_URL": os.environ.get("CACHE_URL", "redis://127.0.0.1:6379/7"),
        "VOUCH_ENVIRONMENT": "sandbox",
        "STRIPE_API_KEY": "sk_test_" + secrets.token_hex(12),
        "STRIPE_API_BASE": sandbox.url,
        "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "MCP_RESOURCE_URL": f"{url}/mcp",
        "MCP_CLIENT_DOCUMENT_PRIVATE_OK": "true",
        "METRICS_TOKEN": METRICS_TOKEN,
        "SECURE_SSL_REDIRECT": "false",
        "DJANGO_EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(mail),
        "EMAIL_BACKEND_INSECURE_OK": "1",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        "PYTHONUNBUFFERED": "1",
    }
    py = sys.executable
    celery = [py, "-m", "celery", "-A", "config.celery_app"]
    processes = [
        _start(
            [py, "-m", "gunicorn", "config.asgi:application", "-k", "uvicorn_worker.UvicornWorker",
             "-c", "gunicorn.conf.py", "--access-logfile", "-", "--workers", "1",
             "--bind", f"127.0.0.1:{port}", "--timeout", "60"],
            env, logs / "gunicorn",
        ),
        _start(
            [*celery, "worker", "--loglevel=INFO", "--concurrency=1", "--without-mingle",
             "--without-gossip", "--without-heartbeat"],
            env, logs / "worker",
        ),
        _start(
            [*celery, "beat", "--loglevel=INFO", "-s", str(tmp_path / "beat-schedule")],
            env, logs / "beat",
        ),
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for process in processes:
                assert process.poll() is None, "a process exited:\n" + "".join(
                    _read(p)[-3000:] for p in sorted(logs.iterdir())
                )
            try:
                if requests.get(f"{url}/healthz", timeout=5).ok:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "gunicorn did not answer"
            time.sleep(0.3)
        yield Stack(url, logs, mail)
    finally:
        for process in processes:
            _stop(process)


class Browser:
    """A person's browser over plain HTTP: production's cookies are Secure, which `requests`
    would not send over http, so the cookies are kept and sent here."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, **kwargs: object) -> requests.Response:
        headers = dict(kwargs.pop("headers", None) or {})  # type: ignore[call-overload]
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = requests.request(
            method, self.url + path, headers=headers, allow_redirects=False, timeout=30, **kwargs
        )  # type: ignore[arg-type]
        self.cookies.update(response.cookies.get_dict())
        return response

    def form(self, path: str, **fields: str) -> tuple[requests.Response, str]:
        """GET the form's page, then POST `fields` with its CSRF token; the token comes back."""
        page = self.request("GET", path)
        assert page.status_code == 200, (path, page.status_code)
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert match, page.text[:2000]
        token = match.group(1)
        answer = self.request("POST", path, data={"csrfmiddlewaretoken": token, **fields})
        return answer, token


def _signed(payload: bytes, secret: str) -> str:
    timestamp = str(int(time.time()))
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


@pytest.mark.django_db(transaction=True)
def test_no_secret_used_against_the_deployed_stack_is_in_any_log(stack: Stack) -> None:
    """Issue 38 items 3 and 4: reset and confirmation keys in URL paths, query values (under
    uvicorn's own access lines too), headers and bodies never reach a log file."""
    used: dict[str, str] = {}
    password = "pw-" + secrets.token_hex(10)
    buyer = User.objects.create_user("lena", "lena@example.com")
    # Hashed as production hashes (the test settings' MD5 hasher is not one it knows).
    hasher = PBKDF2PasswordHasher()
    buyer.password = hasher.encode(password, hasher.salt(), iterations=1000)
    buyer.save(update_fields=["password"])
    email_address_verify(user=buyer)
    used["password"] = password

    # A person signs in: password and CSRF token in the body, the session id in a cookie.
    person = Browser(stack.url)
    answer, csrf = person.form("/accounts/login/", login="lena", password=password)
    assert answer.status_code == 302, re.findall(r"(?s)errorlist.{0,300}", answer.text)
    used["csrf token"] = csrf
    used["session id"] = person.cookies["sessionid"]
    assert person.request("GET", "/escrow/envelopes/").status_code == 200  # the session let them in
    used["csrf cookie"] = person.cookies["csrftoken"]

    # Password reset: the key is in the link's path.
    stranger = Browser(stack.url)
    answer, _ = stranger.form("/accounts/password/reset/", email="lena@example.com")
    assert answer.status_code == 302
    link = stack.mail_link(r"https?://[^\s]+/accounts/password/reset/key/[^\s]+/", 1)
    path = urlsplit(link).path
    used["reset key"] = path.rstrip("/").rsplit("/", 1)[1].split("-", 1)[1]
    answer = stranger.request("GET", path)
    # A valid key is stashed in the session and the page redirects to the key-less form.
    assert answer.status_code == 302
    assert "set-password" in answer.headers["Location"]
    new_password = "new-pw-" + secrets.token_hex(10)
    answer, _ = stranger.form(answer.headers["Location"], password1=new_password,
                              password2=new_password)  # fmt: skip
    assert answer.status_code == 302, answer.text[:2000]
    used["new password"] = new_password
    answer, _ = Browser(stack.url).form("/accounts/login/", login="lena", password=new_password)
    assert answer.status_code == 302  # the new password is the one that signs in

    # Sign-up: an e-mail confirmation key in the link's path.
    newcomer = Browser(stack.url)
    signup_password = "su-" + secrets.token_hex(10)
    answer, _ = newcomer.form(
        "/accounts/signup/", username="mira", email="mira@example.com",
        password1=signup_password, password2=signup_password,
    )  # fmt: skip
    assert answer.status_code == 302, answer.text[:2000]
    used["sign-up password"] = signup_password
    link = stack.mail_link(r"https?://[^\s]+/accounts/confirm-email/[^\s]+/", 1)
    path = urlsplit(link).path
    used["confirmation key"] = path.rstrip("/").rsplit("/", 1)[1]
    answer, _ = newcomer.form(path)
    assert answer.status_code == 302
    assert User.objects.get(username="mira").emailaddress_set.get().verified

    # The metrics token: in the header it is meant for, and wrongly in a query.
    answer = requests.get(
        f"{stack.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
    )
    assert answer.status_code == 200
    answer = requests.get(f"{stack.url}/metrics?token={METRICS_TOKEN}&x=1", timeout=30)
    assert answer.status_code == 403  # Django answered: the token is not taken from a query
    used["metrics token"] = METRICS_TOKEN

    # An API token: as a Bearer header, and wrongly in a query.
    _, api_token = api_token_issue(user=buyer, name="logs")
    answer = requests.get(
        f"{stack.url}/api/v1/me", headers={"Authorization": f"Bearer {api_token}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    answer = requests.get(f"{stack.url}/api/v1/me?access_token={api_token}", timeout=30)
    assert answer.status_code in (401, 403)
    assert answer.json()["error"]["code"] == "not_authenticated"
    used["API token"] = api_token

    # OAuth: an access token on /mcp; the token endpoint's secrets in bodies and queries.
    application = client_register(redirect_uri="http://127.0.0.1/callback")
    access = issue_token(buyer, resource=f"{stack.url}/mcp", application=application)
    answer = requests.post(
        f"{stack.url}/mcp",
        headers={"Authorization": f"Bearer {access}",
                 "Accept": "application/json, text/event-stream",
                 "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"},
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "logs", "version": "1"}}},
        timeout=30,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    used["OAuth access token"] = access
    verifier, challenge = pkce_pair()
    code, refresh, client_secret = (secrets.token_urlsafe(24) for _ in range(3))
    for where in ("body", "query"):
        fields = {
            "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "client_id": application.client_id, "client_secret": client_secret,
            "redirect_uri": "http://127.0.0.1/callback", "refresh_token": refresh,
        }  # fmt: skip
        if where == "body":
            answer = requests.post(f"{stack.url}/o/token/", data=fields, timeout=30)
        else:
            answer = requests.post(f"{stack.url}/o/token/", params=fields, timeout=30)
        assert answer.status_code in (400, 401), answer.text
        assert "error" in answer.json()
        answer = requests.post(
            f"{stack.url}/o/token/",
            data={"grant_type": "refresh_token", "refresh_token": refresh,
                  "client_id": application.client_id},
            timeout=30,
        )  # fmt: skip
        assert answer.status_code in (400, 401)
        assert answer.json()["error"] == "invalid_grant"
    answer = person.request(
        "GET",
        f"/o/authorize/?response_type=code&client_id={application.client_id}"
        f"&redirect_uri=http://127.0.0.1/callback&code_challenge={challenge}"
        f"&code_challenge_method=S256&state={code}&resource={stack.url}/mcp",
    )
    assert answer.status_code in (200, 302), answer.text[:2000]
    used.update({"authorization code": code, "PKCE verifier": verifier,
                 "PKCE challenge": challenge, "refresh token": refresh,
                 "client secret": client_secret})  # fmt: skip

    # Stripe's signed webhook: the signing secret signs, the signature is a header.
    payload = json.dumps(
        {"id": "evt_" + secrets.token_hex(8), "object": "event", "type": "charge.refunded",
         "created": int(time.time()), "data": {"object": {"id": "ch_x", "object": "charge"}}}
    ).encode()  # fmt: skip
    signature = _signed(payload, WEBHOOK_SECRET)
    answer = requests.post(
        f"{stack.url}/webhooks/stripe",
        data=payload,
        headers={"Stripe-Signature": signature, "Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code != 400 or answer.json()["error"]["code"] != "invalid_signature"
    assert answer.status_code < 500, answer.text
    used["webhook secret"] = WEBHOOK_SECRET
    used["webhook signature"] = signature.split("v1=")[1]

    time.sleep(3)  # the access lines and the job lines are flushed
    text = stack.log_text()
    assert "/metrics?token=[dropped]&x=[dropped]" in text  # the lines were written
    assert "/accounts/confirm-email/" in text
    found = {name: secret for name, secret in used.items() if secret in text}
    assert not found, "secrets in the logs: " + ", ".join(
        f"{name}: …{text[max(0, text.index(s) - 120) : text.index(s) + 40]!r}"
        for name, s in found.items()
    )
