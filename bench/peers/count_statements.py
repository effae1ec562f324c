"""gunicorn config (`-c bench/peers/count_statements.py`) for bench/refund_api.py --against:
each worker counts its SQL statements (Django's CursorWrapper.execute / executemany), its
commits and rollbacks and its new connections into a small file of its own under
$BENCH_STATEMENTS_DIR, which the bench sums (transactions whose BEGIN and COMMIT went with the
statements, core.db.Transaction, apart: they cost no round trip of their own). A bench
instrument: the application's code is the same with or without it. $BENCH_GUNICORN_INCLUDE
names a config file this one includes first (Vouch's ./gunicorn.conf.py, which `-c` would
otherwise replace); the peer has none.
$BENCH_STATEMENTS_SQL, when set, is a path prefix: each worker also appends the start of every
statement it runs to `<prefix>.<pid>` (to see which statements a refund makes)."""

import cProfile
import mmap
import os
import runpy
import struct
import threading
import time
from pathlib import Path
from typing import Any

FIELDS = ("statements", "transactions", "connections", "executes", "fused")
BATCH_SEPARATOR = ";\n"  # core.db.BATCH_SEPARATOR: statements sent together in one execute
LAYOUT = "<" + "q" * len(FIELDS)

if included := os.environ.get("BENCH_GUNICORN_INCLUDE"):
    globals().update({k: v for k, v in runpy.run_path(included).items() if not k.startswith("__")})


def read_counts(directory: str) -> dict[str, float]:
    """The sums of every worker's counters in `directory` (workers that exited included)."""
    totals = dict.fromkeys(FIELDS, 0.0)
    for path in Path(directory).iterdir():
        data = path.read_bytes()
        if len(data) == struct.calcsize(LAYOUT):
            for name, value in zip(FIELDS, struct.unpack(LAYOUT, data), strict=True):
                totals[name] += value
    return totals


_included_post_worker_init = globals().get("post_worker_init")


def post_worker_init(worker: Any) -> None:
    if _included_post_worker_init is not None:  # the included config's own hook runs first
        _included_post_worker_init(worker)
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.backends.utils import CursorWrapper

    path = Path(os.environ["BENCH_STATEMENTS_DIR"]) / str(os.getpid())
    path.write_bytes(bytes(struct.calcsize(LAYOUT)))
    with path.open("r+b") as file:
        shared = mmap.mmap(file.fileno(), 0)
    counts = [0] * len(FIELDS)
    lock = threading.Lock()

    def bump(index: int, by: int = 1) -> None:
        with lock:
            counts[index] += by
            shared[:] = struct.pack(LAYOUT, *counts)

    sql_log = os.environ.get("BENCH_STATEMENTS_SQL")
    log = Path(f"{sql_log}.{os.getpid()}").open("a", buffering=1) if sql_log else None  # noqa: SIM115

    def counted(original: Any, index: int) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if index == 0:  # one execute: one round trip, and the statements it sends
                bump(3)
                parts = str(args[1]).split(BATCH_SEPARATOR)
                # BEGIN and COMMIT sent with the statements (core.db.Transaction) are no statement:
                # each COMMIT is one transaction that cost no round trip of its own.
                control = sum(part in ("BEGIN", "COMMIT") for part in parts)
                bump(0, len(parts) - control)
                bump(4, sum(part == "COMMIT" for part in parts))
            else:
                bump(index)
            if log is not None:
                statement = str(args[1]) if index == 0 else original.__name__
                for part in statement.split(BATCH_SEPARATOR):
                    log.write(" ".join(part.split())[:160] + "\n")
            return original(*args, **kwargs)

        return wrapper

    CursorWrapper.execute = counted(CursorWrapper.execute, 0)  # type: ignore[method-assign]
    CursorWrapper.executemany = counted(CursorWrapper.executemany, 0)  # type: ignore[method-assign]
    BaseDatabaseWrapper._commit = counted(BaseDatabaseWrapper._commit, 1)  # type: ignore[method-assign]
    BaseDatabaseWrapper._rollback = counted(BaseDatabaseWrapper._rollback, 1)  # type: ignore[method-assign]
    BaseDatabaseWrapper.connect = counted(BaseDatabaseWrapper.connect, 2)  # type: ignore[method-assign]


_profile = cProfile.Profile(time.process_time) if os.environ.get("BENCH_PROFILE") else None


def _profiled(req: Any) -> bool:
    return req.method == "POST" and req.path.rstrip("/").endswith(("/refund", "/refunds"))


def pre_request(worker: Any, req: Any) -> None:
    if _profile is not None and _profiled(req):
        _profile.enable()


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    if _profile is not None and _profiled(req):
        _profile.disable()


_gc = {"collections": 0, "seconds": 0.0, "started": 0.0}


def _gc_timed(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc["started"] = time.process_time()
    else:
        _gc["collections"] += 1
        _gc["seconds"] += time.process_time() - _gc["started"]


if os.environ.get("BENCH_GC"):
    import gc

    gc.callbacks.append(_gc_timed)


def worker_exit(server: Any, worker: Any) -> None:
    if _profile is not None:
        _profile.dump_stats(f"{os.environ['BENCH_PROFILE']}.{os.getpid()}.prof")
    if os.environ.get("BENCH_GC"):  # CPU time in the garbage collector, for the whole worker
        Path(f"{os.environ['BENCH_GC']}.{os.getpid()}").write_text(
            f"{_gc['collections']} {_gc['seconds']:.3f}\n"
        )
