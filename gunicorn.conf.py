"""gunicorn's settings for Vouch. gunicorn reads ./gunicorn.conf.py from its working directory
by default: production and bench/refund_api.py start it in the repository root (`gunicorn
config.wsgi:application ...`), so these apply there without `-c`. Options given on the command
line (bind, workers, threads, timeouts) take precedence over this file.

Request limits. gunicorn answers a request over its own limits itself, with an HTML page (414,
431) Django never sees. So its limits here are looser than Django's, and Django answers within
them, in the API's JSON error envelope under /api/ (core.api.middleware.RequestLimitsMiddleware,
settings REQUEST_MAX_URL_BYTES, REQUEST_MAX_HEADERS, REQUEST_MAX_HEADER_BYTES):

| what                    | Django (JSON under /api/)          | gunicorn (HTML), this file      |
|-------------------------|------------------------------------|---------------------------------|
| URL (path and query)    | 8,192 bytes: 414 `uri_too_long`    | request line: no limit (0)      |
| number of header fields | 100: 431 `headers_too_large`       | 200                             |
| one header field        | 8,190 bytes: 431 `headers_too_large` | 32,768 bytes                  |

`limit_request_line` has no value between 8,190 and unlimited; 0 lets a longer URL reach Django,
which refuses it. The request line is then bounded only by what sits in front of gunicorn (the
reverse proxy's header buffers, e.g. nginx's `large_client_header_buffers`), and by the worker
timeout: never expose gunicorn directly to the internet."""

import logging
import os
import tempfile
from typing import Any

from gunicorn.glogging import Logger

limit_request_line = 0
limit_request_fields = 200
limit_request_field_size = 32768

# Prometheus counters (ops/collectors.py) in multiprocess mode: every worker writes its own files
# in PROMETHEUS_MULTIPROC_DIR and /metrics, in whichever worker answers, sums them all. Set it (to
# an empty folder, emptied before each start, shared with the Celery workers of this machine so
# their counts are scraped too); unset, each start makes a fresh folder for gunicorn alone. It
# must be in the environment before a worker imports prometheus-client: here, before the app.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="vouch-prometheus-")


class _SecretsRedacted(logging.Filter):
    """ops.logs.SecretsRedacted, imported at the first record (in a worker, once the application
    is loaded: the master reads this file before PROMETHEUS_MULTIPROC_DIR is set, above, and
    needs nothing of Vouch to start)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from ops.logs import SecretsRedacted

        return SecretsRedacted().filter(record)


class QueryValuesDroppedLogger(Logger):
    """gunicorn's logger, whose lines keep no secret a URL carries (docs/operations/logs.md):
    `"GET /metrics?token=[dropped] HTTP/1.1"`, `/accounts/confirm-email/[redacted]/`.

    Its access and error handlers redact every record they write (`_SecretsRedacted`): uvicorn's
    own loggers (`uvicorn.access`, `uvicorn.error`) write through these very handlers under
    uvicorn_worker, and their lines never pass through `atoms` below. `atoms` rewrites every atom
    holding a URL (`%(r)s`, the referer `%(f)s`, `%({location}o)s`, `%({raw_uri}e)s`, ...) and
    `%(q)s` too, so that no access_log_format can print a value; `%(U)s` is the path, redacted."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        # gunicorn makes new handlers on every setup (a reload, a HUP): the filter on each.
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not any(isinstance(f, _SecretsRedacted) for f in handler.filters):
                    handler.addFilter(_SecretsRedacted())

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        # Imported here, in a worker that has loaded the application (see _SecretsRedacted).
        from ops.logs import query_names_only, secrets_redacted

        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        for name, value in atoms.items():
            if name in ("q", "{query_string}e"):
                atoms[name] = query_names_only(value) if value else value
            elif isinstance(value, str) and ("?" in value or "/" in value):
                atoms[name] = secrets_redacted(value)
        return atoms


logger_class = QueryValuesDroppedLogger


def child_exit(server: object, worker: object) -> None:
    """A worker that exited: its live gauges (if any are ever declared) stop counting."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]


def post_worker_init(worker: object) -> None:
    """The worker has loaded the application: collect once, then freeze what is alive now
    (Django, the apps, their modules: alive for the process's life) out of the garbage
    collector's sight, so later collections scan only what requests allocate."""
    import gc

    gc.collect()
    gc.freeze()
