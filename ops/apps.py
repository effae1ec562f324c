import os
from pathlib import Path

from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Vouch operations"

    def ready(self) -> None:
        from celery.signals import task_postrun, task_prerun
        from django_structlog import signals as request_signals
        from django_structlog.celery import signals as task_signals

        from ops import logs

        logs.structlog_configure()
        request_signals.bind_extra_request_metadata.connect(logs.request_started)
        request_signals.bind_extra_request_finished_metadata.connect(logs.request_finished)
        request_signals.bind_extra_request_failed_metadata.connect(logs.request_finished)
        task_signals.bind_extra_task_metadata.connect(logs.task_started)
        task_signals.pre_task_succeeded.connect(logs.task_succeeded)
        task_prerun.connect(logs.task_prerun)
        task_postrun.connect(logs.task_postrun)
        # prometheus-client's multiprocess mode writes a file per process there: it must exist.
        directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
