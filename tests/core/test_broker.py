"""`make run`'s filesystem broker never hands a worker a message that is still being written (the
stock transport did: `JSONDecodeError`, and the worker stopped)."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty

from kombu import Connection

MESSAGES = 3000


def test_a_reader_racing_a_writer_gets_every_message_whole(tmp_path: Path) -> None:
    folder = str(tmp_path)
    options = {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "processed_folder": folder,
        "store_processed": False,
        "control_folder": folder,
    }
    transport = "core.broker:Transport"
    with (
        Connection(transport=transport, transport_options=options) as writing,
        Connection(transport=transport, transport_options=options) as reading,
    ):
        writer_channel, reader_channel = writing.default_channel, reading.default_channel
        writer = threading.Thread(
            target=lambda: [writer_channel._put("q", {"n": n}) for n in range(MESSAGES)]
        )
        writer.start()
        received: list[int] = []
        deadline = time.monotonic() + 60
        while len(received) < MESSAGES and time.monotonic() < deadline:
            try:
                received.append(reader_channel._get("q")["n"])
            except Empty:
                continue
        writer.join()
    assert sorted(received) == list(range(MESSAGES))


def test_make_run_uses_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", VOUCH_VAR_DIR=str(tmp_path))
    code = (
        "import django; django.setup(); from config.celery_app import app; "
        "print(type(app.connection_for_write().transport).__module__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "core.broker", out.stdout
