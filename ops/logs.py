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


# --- query strings: the names are logged, never the values -------------------------------------

DROPPED = "[dropped]"
# The loggers whose message is an access line with the URL in it (runserver's, under `make run`).
_ACCESS_LOGGERS = frozenset({"django.server"})
# A query in free text: from `?` to the next space or quote (a request line's target ends there).
_QUERY_IN_TEXT = re.compile(r"\?([^\s\"']*)")


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


def _request_line_dropped(line: str) -> str:
    """ "GET /path?query": everything after the first `?` is the query, spaces or not."""
    path, mark, query = line.partition("?")
    return f"{path}?{query_names_only(query)}" if mark else line


def drop_query_values(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """The last step before a record is rendered, whoever logged it: django-structlog's `request`
    ("GET /metrics?token=[dropped]"), a `request` object some Django loggers add as an extra (its
    repr would show the whole URL: written as that line instead) and runserver's access line
    keep a query's names, not its values (docs/operations/logs.md)."""
    request = event_dict.get("request")
    if isinstance(request, str):
        event_dict["request"] = _request_line_dropped(request)
    elif request is not None and callable(getattr(request, "get_full_path", None)):
        line = f"{getattr(request, 'method', '')} {request.get_full_path()}"
        event_dict["request"] = _request_line_dropped(line)
    event = event_dict.get("event")
    if event_dict.get("logger") in _ACCESS_LOGGERS and isinstance(event, str):
        event_dict["event"] = query_values_dropped(event)
    return event_dict


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
        final = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    elif renderer == "console":
        final = [structlog.dev.ConsoleRenderer()]
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
                    drop_query_values,
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
