"""The sandbox's state in a file (`--state-file`), so that a restart keeps Stripe's side of the
world as Stripe itself would: `make run` stopped with Ctrl-C and started again finds the charges,
refunds and disputes its database names, and idempotency keys still replay their answers.

What is kept: the whole World (objects, indexes, timelines, idempotency records with their stored
answers, faults and settings), the clock's offset, the seeded randomness, the webhook endpoints
added through the control API and the deliveries still owed (queued or under way: Stripe goes on
retrying them). Endpoints given on the command line are given again by the next start.

Format: one text line naming the format, then a pickle of the above. Pickle, not JSON, because the
World holds bytes (files, stored answers), tuple keys, sets and small classes (timelines, records)
that JSON would need a hand-written codec for, one that drifts each time the World gains a field;
a pickle is safe here because the file is a local development file the sandbox itself wrote, as
trusted as the code beside it (never load one from elsewhere). A file from another version of the
sandbox (another format line, or classes whose fields differ from this code's) or a damaged one is
refused with one line saying how to start afresh, never loaded half-way. One difference is read: a
file written before the World gained a field (every World field has a default) loads with that
field at its default, so a sandbox update does not cost a `make reset` (issue 41).

Saving: from a background thread, at most every SAVE_INTERVAL_S after a change, the World copied
under the state lock (so it is always a state between two requests) and written whole (a
temporary file, then renamed over the old one); at shutdown; and at once after a reset."""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stripe_sandbox.state import Fault, IdempotencyRecord, WebhookBehaviour, World
from stripe_sandbox.timeline import Timeline
from stripe_sandbox.webhooks import Endpoint

if TYPE_CHECKING:
    from stripe_sandbox.server import Sandbox

FORMAT = 1
MAGIC = b"stripe_sandbox state, format "
HEADER = MAGIC + str(FORMAT).encode()
SAVE_INTERVAL_S = 0.5


class StateFileError(Exception):
    """A state file the sandbox will not load; the message is one line for a person."""


def schema() -> dict[str, list[str]]:
    """The fields of every class a state file holds: a file whose classes had other fields was
    written by another version of the sandbox."""
    return {
        "World": [f.name for f in fields(World)],
        "IdempotencyRecord": [f.name for f in fields(IdempotencyRecord)],
        "Fault": [f.name for f in fields(Fault)],
        "WebhookBehaviour": [f.name for f in fields(WebhookBehaviour)],
        "Endpoint": [f.name for f in fields(Endpoint)],
        "Timeline": sorted(vars(Timeline())),
    }


def _schema_readable(saved: Any) -> bool:
    """Whether a file of schema `saved` loads here: the same schema, or one whose World lacks
    only fields this World has since gained (each has a default; the others are the same)."""
    current = schema()
    if saved == current:
        return True
    if not isinstance(saved, dict) or set(saved) != set(current):
        return False
    if any(saved[name] != current[name] for name in current if name != "World"):
        return False
    world = saved["World"]
    return isinstance(world, list) and set(world) < set(current["World"])


def _refused(path: Path, reason: str) -> StateFileError:
    return StateFileError(
        f"the state file {path} {reason}. To start afresh, delete it (beside `make run`, "
        "`make reset` clears it together with the database, whose records name its objects)."
    )


class StateFile:
    def __init__(self, path: str | os.PathLike[str], sandbox: Sandbox) -> None:
        self.path = Path(path)
        self.sandbox = sandbox
        self._cv = threading.Condition()
        self._dirty = False
        self._closing = False
        self._saved_at = 0.0
        self._write_lock = threading.Lock()
        self._dumped = 0  # dumps taken, in order; the file holds the newest one written
        self._written = 0
        self._last_failure = ""
        self._thread = threading.Thread(target=self._run, name="sandbox-state", daemon=True)

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> bool:
        """Put the file's state into the sandbox; False when there is no file yet."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _refused(self.path, f"cannot be read ({exc.strerror or exc})") from exc
        first, _, rest = data.partition(b"\n")
        if not first.startswith(MAGIC):
            raise _refused(self.path, "is not a Stripe sandbox state file")
        if first != HEADER:
            found = first[len(MAGIC) :].decode("ascii", "replace")
            raise _refused(
                self.path,
                f"was written by another version of the sandbox (format {found}, this one "
                f"reads format {FORMAT})",
            )
        try:
            # The sandbox's own file (see the module's docstring), never one from elsewhere.
            payload = pickle.loads(rest)  # noqa: S301
        except Exception as exc:  # any damage: truncated, overwritten, classes since renamed
            raise _refused(self.path, f"cannot be read ({type(exc).__name__})") from exc
        if not isinstance(payload, dict) or not _schema_readable(payload.get("schema")):
            raise _refused(
                self.path,
                "was written by another version of the sandbox (its objects' fields differ)",
            )
        self._restore(payload)
        return True

    def _restore(self, payload: dict[str, Any]) -> None:
        sandbox = self.sandbox
        world = World(**payload["world"])
        # A request that had claimed its key but not yet run never ran: its key is free again.
        world.idempotency = {k: r for k, r in world.idempotency.items() if not r.running}
        with sandbox.state.lock:
            sandbox.state.world = world
            sandbox.state.random.setstate(payload["random"])
            sandbox.clock.set_offset(payload["clock_offset"])
            sandbox.dispatcher.restore(payload["webhooks"])

    # --- saving ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def changed(self) -> None:
        """Something in the sandbox changed: save it soon (called under the state lock)."""
        with self._cv:
            self._dirty = True
            self._cv.notify()

    def save(self) -> None:
        """Write the state as it is now, whole."""
        state = self.sandbox.state
        with state.lock:
            data = self._dump()
            self._dumped += 1
            number = self._dumped
        with self._write_lock:
            if number < self._written:
                return  # a newer state reached the file first
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            self._written = number
        self._saved_at = time.monotonic()

    def _dump(self) -> bytes:
        sandbox = self.sandbox
        world = sandbox.state.world
        payload = {
            "schema": schema(),
            "world": {f.name: getattr(world, f.name) for f in fields(World)},
            "clock_offset": sandbox.clock.offset,
            "random": sandbox.state.random.getstate(),
            "webhooks": sandbox.dispatcher.snapshot(),
        }
        return HEADER + b"\n" + pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        """Stop the background saver and save one last time (at shutdown)."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._save_or_say()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._dirty and not self._closing:
                    self._cv.wait()
                if self._closing:
                    return
                # At most one save every SAVE_INTERVAL_S: changes meanwhile ride along.
                delay = self._saved_at + SAVE_INTERVAL_S - time.monotonic()
                if delay > 0:
                    self._cv.wait(delay)
                    if self._closing:
                        return
                self._dirty = False
            self._save_or_say()

    def _save_or_say(self) -> None:
        try:
            self.save()
            self._last_failure = ""
        except OSError as exc:
            failure = f"stripe_sandbox: cannot save the state file {self.path}: {exc}"
            if failure != self._last_failure:  # once, not at every change
                print(failure, file=sys.stderr, flush=True)
            self._last_failure = failure
