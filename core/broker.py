"""The embedded broker of `make run`: kombu's filesystem transport, with a message written whole
before it can be seen.

kombu's `_put` creates `<time>_<uuid>.<queue>.msg` and only then locks and writes it, while `_get`
takes a message by renaming it out of the folder (a rename ignores the writer's lock). A worker that
lists the folder in between takes an empty file: `JSONDecodeError`, an unrecoverable error that
stops the worker, and the message written after the rename is lost. Seen under `make run` after a
couple of minutes of beat's 2 s polls. Here a message is written under a name no queue reads
(`….msg.part`) and renamed into place, which is atomic on one filesystem."""

import os
import uuid
from time import monotonic
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.part"  # `_get` matches `<queue>.msg` exactly: it skips this one
        with open(partial, "wb") as file:
            file.write(str_to_bytes(dumps(payload)))
        os.replace(partial, final)


class Transport(filesystem.Transport):
    Channel = Channel
