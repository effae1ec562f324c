"""The provider call budgets (core.budget), shared through the database by separate OS processes
and threads: on PostgreSQL (the suite's database) and on SQLite (what `make run` uses). One call
takes a slot of every budget it names at once; money reserves ahead, readbacks take only room
that is free, reconciliation only room that has been idle (docs/decisions/0018)."""

import bisect
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.core.cache import cache
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from config.celery_app import app
from core.budget import (
    WINDOW_MARGIN_S,
    CallBudget,
    Priority,
    budget_from_settings,
    budget_wait,
    current_wait_s,
    slots_penalize,
    slots_take,
)
from core.models import ProviderCallBudget

ROOT = Path(__file__).resolve().parents[2]

# Each process: connect first, start at the agreed moment, take `count` calls' slots of the global
# budget and of one endpoint's (as the adapter does) and report the moment each call starts.
_TAKER = """
import json, sys, time
import django
django.setup()
from django.db import connection
from core.budget import CallBudget, Priority, slots_take
endpoint, global_rps, endpoint_rps, count, start_at = sys.argv[1], *map(float, sys.argv[2:6])
connection.ensure_connection()
budgets = [CallBudget("test:global", global_rps, margin=0.02),
           CallBudget(endpoint, endpoint_rps, margin=0.02)]
time.sleep(max(0.0, start_at - time.time()))
starts, waits = [], []
for _ in range(int(count)):
    waits.append(slots_take(budgets, priority=Priority.MONEY, wait_s=60))
    starts.append(time.time())
print(json.dumps({"starts": starts, "waits": waits}))
"""

_CREATE_TABLE = """
import django
django.setup()
from django.db import connection
from core.models import ProviderCallBudget
with connection.schema_editor() as editor:
    editor.create_model(ProviderCallBudget)
"""


def _postgres_env() -> dict[str, str]:
    db = connection.settings_dict
    url = (
        f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": url}


def _sqlite_env(var_dir: Path) -> dict[str, str]:
    """`make run`'s settings: SQLite under var/, nothing else running."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "STRIPE_API_KEY")}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings.local", "VOUCH_VAR_DIR": str(var_dir)})
    subprocess.run([sys.executable, "-c", _CREATE_TABLE], cwd=ROOT, env=env, check=True, timeout=60)
    return env


def _take_in_processes(
    env: dict[str, str], jobs: list[tuple[str, float, float, int]], delay_s: float = 3.0
) -> list[dict[str, Any]]:
    """Each job (endpoint, global rps, endpoint rps, calls) in a process of its own, all at once."""
    start_at = time.time() + delay_s  # after every process has started and connected
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _TAKER, endpoint, str(g), str(e), str(n), str(start_at)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
        )
        for endpoint, g, e, n in jobs
    ]
    reports = []
    for process in processes:
        out, _ = process.communicate(timeout=180)
        assert process.returncode == 0
        reports.append(json.loads(out))
    return reports


def _most_in_one_second(starts: list[float]) -> int:
    """The most calls that started within any one-second window [t, t + 1)."""
    ordered = sorted(starts)
    # A window holding the most calls can always be slid to begin at one of them.
    return max(bisect.bisect_left(ordered, s + 1.0) - i for i, s in enumerate(ordered))


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_two_processes_on_one_endpoint_never_start_more_than_its_limit_in_any_second(
    transactional_db: None, tmp_path: Path, backend: str
) -> None:
    env = _postgres_env() if backend == "postgresql" else _sqlite_env(tmp_path)
    endpoint = f"test:POST /v1/refunds:{backend}"
    first, second = _take_in_processes(env, [(endpoint, 100, 20, 40), (endpoint, 100, 20, 40)])
    starts = first["starts"] + second["starts"]

    assert len(starts) == 80
    assert None not in first["waits"] + second["waits"]
    # At most the limit; one more only when a loaded machine records a start a few ms late
    # (slots are 1.005/20 s apart: 21 need 1.005 s). A budget that failed would show 40.
    assert _most_in_one_second(starts) <= 21
    # Both processes ran at once and shared one budget: each waited its turn...
    assert min(second["starts"]) < max(first["starts"])
    assert min(first["starts"]) < max(second["starts"])
    # ...and together they used it, rather than crawl: 80 calls at 20 a second (with the margin).
    span = max(starts) - min(starts)
    assert 79 / 20 <= span <= 79 * 1.02 / 20 + 0.5


def test_the_global_budget_is_shared_across_endpoints(transactional_db: None) -> None:
    """Two endpoints of 20 a second each, under a global limit of 20: together, 20 a second."""
    jobs = [("test:POST /v1/refunds", 20.0, 20.0, 30), ("test:GET /v1/charges", 20.0, 20.0, 30)]
    refunds, charges = _take_in_processes(_postgres_env(), jobs)
    starts = refunds["starts"] + charges["starts"]
    # At most the limit; one more only when a loaded machine records a start a few ms late
    # (slots are 1.005/20 s apart: 21 need 1.005 s). A budget that failed would show 40.
    assert _most_in_one_second(starts) <= 21
    assert _most_in_one_second(refunds["starts"]) < 20  # neither had its endpoint to itself
    assert max(starts) - min(starts) >= 59 / 20


def _threads(*jobs: Callable[[], None]) -> list[threading.Thread]:
    """Start each job in a thread of its own (each with its own database connection)."""

    def run(job: Callable[[], None]) -> None:
        try:
            job()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    return threads


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()


def _taker(
    budgets: list[CallBudget], priority: Priority, into: dict[str, Any], label: str, wait: float
) -> Callable[[], None]:
    def job() -> None:
        waited = slots_take(budgets, priority=priority, wait_s=wait)
        into[label] = (time.time(), waited)

    return job


def _stored(name: str) -> float:
    return ProviderCallBudget.objects.get(name=name).next_slot_at


def test_money_reserves_ahead_while_a_readback_waits_for_room(transactional_db: None) -> None:
    budget = CallBudget("test-money-first", 5, margin=0.02)  # a slot every 0.204 s
    started: dict[str, Any] = {}
    # Five payments reserve the next second's slots at once.
    first = _threads(*(_taker([budget], Priority.MONEY, started, f"m{i}", 5) for i in range(5)))
    while ProviderCallBudget.objects.filter(name=budget.name).count() == 0 or (
        _stored(budget.name) < time.time() + 0.8
    ):
        time.sleep(0.005)
    # A readback asks now, a sixth payment after it: the payment still goes first.
    readback = _threads(_taker([budget], Priority.READBACK, started, "readback", 5))
    time.sleep(0.3)
    late = _threads(_taker([budget], Priority.MONEY, started, "late", 5))
    _join(first + readback + late)

    assert started["readback"][1] is not None
    assert started["late"][0] < started["readback"][0]
    assert all(started[f"m{i}"][0] < started["readback"][0] for i in range(5))


def test_readbacks_go_before_reconciliation(transactional_db: None) -> None:
    limit = CallBudget("test-readback-first", 5, margin=0.02)  # one of Stripe's: idle rule on
    lane = CallBudget("test-reconciliation-lane", 100, lane=Priority.RECONCILE)
    started: dict[str, Any] = {}
    busy = _threads(*(_taker([limit], Priority.MONEY, started, f"m{i}", 5) for i in range(3)))
    while ProviderCallBudget.objects.filter(name=limit.name).count() == 0 or (
        _stored(limit.name) < time.time() + 0.4
    ):
        time.sleep(0.005)
    # Reconciliation asks first, then three readbacks: all three readbacks start before it.
    reconcile = _threads(_taker([limit, lane], Priority.RECONCILE, started, "reconcile", 10))
    time.sleep(0.05)
    readbacks = _threads(
        *(_taker([limit], Priority.READBACK, started, f"r{i}", 10) for i in range(3))
    )
    _join(busy + reconcile + readbacks)

    assert started["reconcile"][1] is not None
    assert all(started[f"r{i}"][0] < started["reconcile"][0] for i in range(3))


@pytest.mark.parametrize("priority", list(Priority))
def test_no_room_within_the_wait_takes_nothing_and_says_so(
    transactional_db: None, priority: Priority
) -> None:
    budgets = [CallBudget("test-full-global", 25), CallBudget(f"test-full-{priority}", 25)]
    slots_penalize(budgets[1:], 5)  # the endpoint's next slot is 5 s away; the global is free
    held = _stored(f"test-full-{priority}")
    asked = time.monotonic()
    assert slots_take(budgets, priority=priority, wait_s=0.3) is None
    assert time.monotonic() - asked < 5
    # Nothing was taken: neither the endpoint's slot nor the global one moved.
    assert _stored(f"test-full-{priority}") == held
    assert (
        not ProviderCallBudget.objects.filter(name="test-full-global")
        .exclude(next_slot_at=0)
        .exists()
    )


def test_a_penalty_holds_off_another_process(transactional_db: None) -> None:
    slots_take([CallBudget("test:global", 100)], priority=Priority.MONEY)
    penalized_at = time.time()
    slots_penalize([CallBudget("test:global", 100)], 4.0)
    (report,) = _take_in_processes(_postgres_env(), [("test:other", 100, 100, 2)], delay_s=0)
    assert report["starts"][0] >= penalized_at + 4.0
    assert report["waits"][0] > 0  # it was the budget that held it, not a slow start


def test_a_shorter_penalty_never_shortens_a_longer_one(transactional_db: None) -> None:
    budget = CallBudget("test-penalties", 20)
    penalized_at = time.time()
    budget.penalize(10)
    budget.penalize(1)
    assert _stored("test-penalties") >= penalized_at + 10


def test_an_unlimited_budget_writes_nothing(transactional_db: None) -> None:
    budget = CallBudget("test-unlimited", 0)
    started = time.monotonic()
    with CaptureQueriesContext(connection) as queries:
        waits = [slots_take([budget], priority=Priority.MONEY) for _ in range(1000)]
        budget.penalize(30)
        assert slots_take([], priority=Priority.READBACK) == 0.0
    assert waits == [0.0] * 1000
    assert time.monotonic() - started < 1
    assert len(queries) == 0
    assert not ProviderCallBudget.objects.exists()
    CallBudget("test-negative", -1).take()
    assert not ProviderCallBudget.objects.exists()


def test_one_call_takes_every_budget_in_one_transaction(transactional_db: None) -> None:
    budgets = [CallBudget("test-b", 10), CallBudget("test-a", 5)]
    with CaptureQueriesContext(connection) as queries:
        first = slots_take(budgets, priority=Priority.PERSON)
    sql = [q["sql"] for q in queries.captured_queries]
    # The rows locked in the order of their names (one order for every process: no deadlock).
    selects = [s for s in sql if s.startswith("SELECT name")]
    assert selects
    assert all("FOR UPDATE" in s for s in selects)
    assert selects[0].index("ORDER BY name") > 0
    assert first is not None
    # Both moved on by their own spacing from the same start.
    a, b = _stored("test-a"), _stored("test-b")
    assert abs((a - b) - ((1 + WINDOW_MARGIN_S) / 5 - (1 + WINDOW_MARGIN_S) / 10)) < 1e-6
    # The second call waits for the slower budget's next slot (longer than a web request would).
    second = slots_take(budgets, priority=Priority.PERSON, wait_s=1.0)
    assert second is not None
    assert second > 0.1  # a lower bound: a slow machine only waits less


def test_budgets_from_settings(settings: Any) -> None:
    settings.RECONCILIATION_MAX_RPS = 20.0
    settings.VERIFICATION_MAX_RPS = 50.0
    assert budget_from_settings("reconciliation") == CallBudget(
        "reconciliation", 20.0, lane=Priority.RECONCILE
    )
    assert budget_from_settings("verification") == CallBudget(
        "verification", 50.0, lane=Priority.READBACK
    )
    settings.VERIFICATION_MAX_RPS = 0
    assert not budget_from_settings("verification").limited
    with pytest.raises(ValueError, match="no call budget 'webhooks'"):
        budget_from_settings("webhooks")
    with pytest.raises(ValueError, match="a budget's name"):
        CallBudget("x" * 51, 1)


def test_the_wait_is_the_callers_else_the_processs(settings: Any) -> None:
    settings.STRIPE_BUDGET_WAIT_S = 0.5
    assert current_wait_s() == 0.5
    with budget_wait(3):
        assert current_wait_s() == 3
        with budget_wait(0):
            assert current_wait_s() == 0
        assert current_wait_s() == 3
    assert current_wait_s() == 0.5


@app.task(name="tests.core.budget_wait_probe")
def _probe() -> None:
    cache.set("test-budget-wait-probe", current_wait_s(), 60)


@pytest.mark.django_db(transaction=True)
def test_a_workers_task_waits_the_workers_wait(celery_broker: str, settings: Any) -> None:
    """A task run by a worker may wait STRIPE_BUDGET_WORKER_WAIT_S; called in process, not."""
    cache.delete("test-budget-wait-probe")
    with app.connection_for_write() as broker:
        broker.default_channel.queue_purge(app.conf.task_default_queue)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        _probe.delay()
        deadline = time.monotonic() + 20
        while cache.get("test-budget-wait-probe") is None:
            assert time.monotonic() < deadline, "the worker did not run the probe in 20 s"
            time.sleep(0.05)
    assert cache.get("test-budget-wait-probe") == settings.STRIPE_BUDGET_WORKER_WAIT_S == 30
    _probe()
    assert cache.get("test-budget-wait-probe") == settings.STRIPE_BUDGET_WAIT_S
    assert current_wait_s() == settings.STRIPE_BUDGET_WAIT_S  # nothing leaked out of the task
