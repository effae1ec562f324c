"""Structured logs: one line per request and per job run, through structlog.

Every record, ours (structlog) and the standard library's (`logging.getLogger("vouch.…")`, Django,
Celery), is rendered by one `ProcessorFormatter` on the root handler: JSON lines in production and
tests, human-readable under `make run` (`logging_config(renderer="console")`). The context bound
by django-structlog (request_id, user_id, ip; in a job run task_id, parent_task_id and the
request_id of the request that enqueued it) is merged into every record, foreign ones included.

The request line is django-structlog's `request_finished` (its `request_started` is DEBUG), with
`route`, `status`, `duration_ms` and `provider_ms` added here; the job line is its
`task_succeeded` / `task_failed` (its `task_started` is DEBUG), with `task`, `duration_ms` and
`provider_ms`. This module imports no model: settings import it."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from core.periodic import all_schedules
from core.timing import provider_seconds, provider_timing_reset, provider_timing_start

# The events that end a request or a job run: they carry the provider time.
_LAST_EVENTS = frozenset({"request_finished", "request_failed", "task_succeeded", "task_failed"})


def add_provider_time(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """`provider_ms` on the line that ends a request or a job run: the time spent waiting for the
    provider (core.timing), counted by the adapter's one call path."""
    if event_dict.get("event") in _LAST_EVENTS and "provider_ms" not in event_dict:
        seconds = provider_seconds()
        if seconds is not None:
            event_dict["provider_ms"] = round(seconds * 1000, 2)
    return event_dict


# A periodic job's run that did nothing (a count of 0: no run claimed, no event to retry, no key
# to prune) writes no line (SPEC §11: one line per run, not per tick that found nothing). Set by
# `task_succeeded` below for the run's own `task_succeeded` line, read by `drop_idle_job_runs`.
_IDLE_RUN = "_vouch_idle_run"


def drop_idle_job_runs(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Drop the `task_succeeded` line of a periodic job's run that found nothing to do."""
    idle = event_dict.pop(_IDLE_RUN, False)
    if idle and event_dict.get("event") == "task_succeeded":
        raise structlog.DropEvent
    return event_dict


def _periodic_tasks() -> frozenset[str]:
    """The task names beat runs (core.periodic), read at the first job run, once the apps are
    ready (core.periodic itself imports no app, so settings may import this module)."""
    global _PERIODIC
    if _PERIODIC is None:
        _PERIODIC = frozenset(schedule.task for schedule in all_schedules())
    return _PERIODIC


_PERIODIC: frozenset[str] | None = None


def job_run_idle(*, task: str | None, result: Any) -> bool:
    """Whether a job run found nothing to do: a periodic task that answered a count of 0 (or an
    empty collection). Other tasks' runs, and periodic runs that answer anything else, count."""
    if task is None or task not in _periodic_tasks():
        return False
    if isinstance(result, bool):
        return False
    return result == 0 or (isinstance(result, list | tuple | set | dict) and not result)


def _shared_processors() -> list[Processor]:
    """What every record gets, whoever logged it."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


# --- secrets in URLs: a query's values dropped, a tokened path's key redacted -------------------
# Every line any process writes passes through `secrets_redacted`: the formatter of Django's
# LOGGING (`redact_secrets`, ours, Django's, Celery's records) and gunicorn's access and error
# handlers, which uvicorn's own loggers share under uvicorn_worker (gunicorn.conf.py).

DROPPED = "[dropped]"
REDACTED = "[redacted]"
# A query in free text: from `?` to the next space or quote (a request line's target ends there).
_QUERY_IN_TEXT = re.compile(r"\?([^\s\"']*)")
# A URL pattern parameter whose value is a secret: allauth's `key` (password reset, e-mail
# confirmation), any `token`, `secret`, `signature`. Read from the URL conf, so a new tokened
# route is covered without a list to keep.
_SECRET_PARAMETER = re.compile(r"key|token|secret|signature|password", re.IGNORECASE)
_NAMED_GROUP = re.compile(r"\(\?P<(\w+)>")
# One path segment in text: what a parameter's value may hold there (never a separator, a space,
# a quote, a query or a fragment).
_SEGMENT = r"[^/\s?#\"'\\<>\x1b]+"


def query_names_only(query: str) -> str:
    """A query string (without its `?`) with every value written `[dropped]` and every name kept:
    `token=abc&limit=5&flag` → `token=[dropped]&limit=[dropped]&flag` (a name sent without `=`
    has no value to drop). A secret wrongly put in a URL is then never written down."""
    return "&".join(
        f"{name}={DROPPED}" if equals else name
        for name, equals, _ in (part.partition("=") for part in query.split("&"))
    )


def query_values_dropped(text: str) -> str:
    """`text` (a URL, a path, a request line, an access line) with the values of every query
    string in it dropped as `query_names_only` drops them."""
    if "?" not in text:
        return text
    return _QUERY_IN_TEXT.sub(lambda match: "?" + query_names_only(match.group(1)), text)


def _groups_as_segments(regex: str) -> str:
    """A URL pattern's regex with each named group's own pattern replaced by one path segment
    (`(?P<key>.+)` would run to the end of a line in free text)."""
    out, position = [], 0
    for match in _NAMED_GROUP.finditer(regex):
        if match.start() < position:
            continue  # a group nested in one already replaced
        depth, index = 1, match.end()
        while index < len(regex) and depth:
            if regex[index] == "\\":
                index += 2
                continue
            depth += {"(": 1, ")": -1}.get(regex[index], 0)
            index += 1
        out.append(regex[position : match.start()] + f"(?P<{match.group(1)}>{_SEGMENT})")
        position = index
    return "".join(out) + regex[position:]


def _bare(regex: str) -> str:
    """A pattern's regex without its anchors: it is joined to its parents' and found in text."""
    regex = regex.removeprefix("^")
    for end in ("\\Z", "$"):
        regex = regex.removesuffix(end)
    return regex


_SECRET_ROUTES: dict[str, re.Pattern[str]] | None = None
_READING_URLS = False


def secret_path_routes() -> dict[str, re.Pattern[str]]:
    """Every route of the URL conf with a secret in its path (a parameter named like a key or a
    token), as a regex that finds it in free text; read once the apps are ready (before, e.g. in
    gunicorn's master, none: no request has been served there)."""
    global _SECRET_ROUTES, _READING_URLS
    if _SECRET_ROUTES is not None:
        return _SECRET_ROUTES
    from django.apps import apps

    if _READING_URLS or not apps.ready:
        return {}
    from django.urls import URLResolver, get_resolver

    routes: dict[str, re.Pattern[str]] = {}

    def walk(resolver: URLResolver, regex_prefix: str, text_prefix: str) -> None:
        for pattern in resolver.url_patterns:
            regex = regex_prefix + _bare(pattern.pattern.regex.pattern)
            text = text_prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern, regex, text)
            elif any(_SECRET_PARAMETER.search(name) for name in _NAMED_GROUP.findall(regex)):
                # A path in text: after a `/`, ending before a query, a space, a quote or the end.
                found = "/" + _groups_as_segments(regex) + r"(?=[?#\s\"'\\<>\x1b]|$)"
                routes[text] = re.compile(found)

    _READING_URLS = True  # a line logged while the URL conf is imported is not redacted by it
    try:
        walk(get_resolver(), "", "")
    finally:
        _READING_URLS = False
    _SECRET_ROUTES = routes
    return routes


def _secret_segments_redacted(match: re.Match[str]) -> str:
    """The matched path with each segment holding a secret parameter written `[redacted]` (the
    whole segment: a reset link's `<uidb36>-<key>` is one)."""
    path, start = match.group(0), match.start()
    spans: list[tuple[int, int]] = []
    for name, value in match.groupdict().items():
        if value is None or not _SECRET_PARAMETER.search(name):
            continue
        left, right = match.start(name) - start, match.end(name) - start
        left = path.rfind("/", 0, left) + 1
        slash = path.find("/", right)
        spans.append((left, len(path) if slash < 0 else slash))
    out, position = [], 0
    for left, right in sorted(spans):
        if left < position:
            continue
        out.append(path[position:left] + REDACTED)
        position = right
    return "".join(out) + path[position:]


def secrets_redacted(text: str) -> str:
    """`text` (a path, a request or access line, a URL in a message or a traceback) with every
    secret a URL can carry left out: a tokened route's key `[redacted]` (`secret_path_routes`)
    and every query value `[dropped]` (`query_values_dropped`)."""
    if "/" in text:
        for route in secret_path_routes().values():
            text = route.sub(_secret_segments_redacted, text)
    return query_values_dropped(text)


def _redacted(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return secrets_redacted(value)
    if depth < 4 and isinstance(value, dict):
        return {key: _redacted(item, depth + 1) for key, item in value.items()}
    if depth < 4 and isinstance(value, list | tuple):
        return [_redacted(item, depth + 1) for item in value]
    return value


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """The formatter's step before a record is rendered, whoever logged it: every string in it
    (the event, django-structlog's `request` "GET /metrics?token=[dropped]", extras, the rendered
    traceback) through `secrets_redacted`. A `request` object some Django loggers add as an
    extra (its repr would show the whole URL) is written as its request line."""
    request = event_dict.get("request")
    if request is not None and callable(getattr(request, "get_full_path", None)):
        event_dict["request"] = f"{getattr(request, 'method', '')} {request.get_full_path()}"
    for key, value in event_dict.items():
        event_dict[key] = _redacted(value)
    return event_dict


def redact_rendered(logger: WrappedLogger, method_name: str, line: Any) -> str:
    """After the console renderer (`make run`): the line as written, whatever it prints (a
    processor's type says it takes an event dict; here, the last, it takes the rendered line)."""
    return secrets_redacted(str(line))


class SecretsRedacted(logging.Filter):
    """A handler's filter for records not rendered by our formatter (gunicorn's access and error
    logs, and uvicorn's, which write to the same handlers): the message, traceback and stack
    as text, through `secrets_redacted`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str):
            return True
        record.msg, record.args = secrets_redacted(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = secrets_redacted(record.exc_text)
        if record.stack_info:
            record.stack_info = secrets_redacted(record.stack_info)
        return True


def structlog_configure() -> None:
    """structlog's loggers hand their records to the standard library (filtered by its levels,
    rendered by the root handler's formatter)."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            drop_idle_job_runs,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            add_provider_time,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def logging_config(*, renderer: str, level: str) -> dict[str, Any]:
    """Django's LOGGING: every record through one formatter, `json` (one object a line) or
    `console` (aligned, coloured when a terminal)."""
    final: list[Processor]
    if renderer == "json":
        # The traceback rendered before `redact_secrets`, so that a URL in it is redacted too.
        final = [
            structlog.processors.format_exc_info,
            redact_secrets,
            structlog.processors.JSONRenderer(),
        ]
    elif renderer == "console":
        # The console renderer draws the traceback itself: the line is redacted once rendered.
        # A plain traceback: rich's shows locals and wraps long lines, a URL cut in two.
        console = structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
        final = [redact_secrets, console, redact_rendered]
    else:
        raise ValueError(f"renderer must be json or console, not {renderer!r}")
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "structured": {
                "()": structlog.stdlib.ProcessorFormatter,
                "processors": [
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    *final,
                ],
                # Records from the standard library (ours, Django's, Celery's): the same context.
                "foreign_pre_chain": [
                    *_shared_processors(),
                    drop_idle_job_runs,
                    structlog.stdlib.ExtraAdder(),
                ],
            }
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Django's own loggers write to the root handler only, not to it and their own.
            "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
            # Every response is on its request line already (a 4xx at WARNING, a 5xx at ERROR), and
            # an exception's traceback on django-structlog's `request_failed`: not twice.
            "django.request": {"handlers": ["console"], "level": "CRITICAL", "propagate": False},
            # runserver's access line (`make run`) says what the request line says.
            "django.server": {"handlers": ["console"], "level": "ERROR", "propagate": False},
            # The SDK logs two INFO lines per call: noise beside our own records.
            "stripe": {"level": "WARNING"},
            # Celery's "received" / "succeeded in" lines: the job line says it (task_succeeded).
            "celery.app.trace": {"level": "WARNING"},
            "celery.worker.strategy": {"level": "WARNING"},
            # Beat's "Sending due task" every 2 s: the job's own line says that it ran.
            "celery.beat": {"level": "WARNING"},
        },
    }
    # A person at `make run`'s terminal (console): warnings and failures of jobs, and
    # verification's once-a-minute count of pending runs, not a line for every run. JSON: a line
    # for every run that did something (an idle periodic run writes none: drop_idle_job_runs).
    config["loggers"]["django_structlog.celery.receivers"] = {
        "level": "WARNING" if renderer == "console" else "NOTSET"
    }
    return config


# --- django-structlog's signals: what the request line adds -------------------------------------


def request_started(request: Any, **kwargs: Any) -> None:
    """The start time, and `ip`: the address the connection came from (never a header a client
    can set; behind a proxy, the proxy's)."""
    request._vouch_started = time.perf_counter()
    structlog.contextvars.bind_contextvars(ip=request.META.get("REMOTE_ADDR"))


def request_finished(request: Any, log_kwargs: dict[str, Any], **kwargs: Any) -> None:
    """route (the URL pattern, not the path: ids stay out of the label), status, duration."""
    match = getattr(request, "resolver_match", None)
    log_kwargs["route"] = match.route if match is not None else None
    if "code" in log_kwargs:
        log_kwargs["status"] = log_kwargs.pop("code")
    started = getattr(request, "_vouch_started", None)
    if started is not None:
        log_kwargs["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)


def task_started(task: Any, **kwargs: Any) -> None:
    """The task's name on every line of its run (django-structlog's job line lacks it)."""
    structlog.contextvars.bind_contextvars(task=task.name)


def task_succeeded(result: Any = None, **kwargs: Any) -> None:
    """Before the run's `task_succeeded` line: mark a periodic run that did nothing, so that
    `drop_idle_job_runs` leaves its line out (unbound again when the run ends)."""
    task = structlog.contextvars.get_contextvars().get("task")
    if job_run_idle(task=task, result=result):
        structlog.contextvars.bind_contextvars(**{_IDLE_RUN: True})


# --- Celery's signals: provider time per job run -----------------------------------------------


def task_prerun(task: Any = None, **kwargs: Any) -> None:
    if task is not None:
        task.request._vouch_provider_timing = provider_timing_start()


def task_postrun(task: Any = None, **kwargs: Any) -> None:
    structlog.contextvars.unbind_contextvars(_IDLE_RUN)
    token = getattr(getattr(task, "request", None), "_vouch_provider_timing", None)
    if token is not None:
        provider_timing_reset(token)
