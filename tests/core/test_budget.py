"""The provider call budget (core.budget), shared through the database by separate OS processes:
on PostgreSQL (the suite's database) and on SQLite (what `make run` uses)."""

import bisect
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.budget import WINDOW_MARGIN_S, CallBudget, budget_from_settings
from core.models import ProviderCallBudget

ROOT = Path(__file__).resolve().parents[2]

# Each process: connect first, start at the agreed moment, take `count` slots and report the
# moment each call would start (and how long each take waited).
_TAKER = """
import json, sys, time
import django
django.setup()
from django.db import connection
from core.budget import CallBudget
name, per_second, count, start_at = sys.argv[1], *map(float, sys.argv[2:5])
connection.ensure_connection()
budget = CallBudget(name, per_second)
time.sleep(max(0.0, start_at - time.time()))
starts, waits = [], []
for _ in range(int(count)):
    waits.append(budget.take())
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
    env: dict[str, str], name: str, per_second: float, counts: list[int], delay_s: float = 3.0
) -> list[dict[str, Any]]:
    start_at = time.time() + delay_s  # after every process has started and connected
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _TAKER, name, str(per_second), str(count), str(start_at)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
        )
        for count in counts
    ]
    reports = []
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        reports.append(json.loads(out))
    return reports


def _most_in_one_second(starts: list[float]) -> int:
    """The most calls that started within any one-second window [t, t + 1)."""
    ordered = sorted(starts)
    # A window holding the most calls can always be slid to begin at one of them.
    return max(bisect.bisect_left(ordered, s + 1.0) - i for i, s in enumerate(ordered))


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_two_processes_never_start_more_than_20_calls_in_any_second(
    transactional_db: None, tmp_path: Path, backend: str
) -> None:
    env = _postgres_env() if backend == "postgresql" else _sqlite_env(tmp_path)
    first, second = _take_in_processes(env, f"test-two-{backend}", 20, [40, 40])
    starts = first["starts"] + second["starts"]

    assert len(starts) == 80
    assert _most_in_one_second(starts) <= 20
    # Both processes ran at once and shared one budget: each waited its turn...
    assert min(second["starts"]) < max(first["starts"])
    assert min(first["starts"]) < max(second["starts"])
    assert sum(w > 0 for w in first["waits"] + second["waits"]) >= 60
    # ...and together they used it, rather than crawl: 80 calls at 20 a second (with the margin).
    span = max(starts) - min(starts)
    assert 79 / 20 <= span <= 79 * (1 + WINDOW_MARGIN_S) / 20 + 0.5


def test_a_penalty_holds_off_another_process(transactional_db: None) -> None:
    CallBudget("test-penalty", 20).take()
    penalized_at = time.time()
    CallBudget("test-penalty", 20).penalize(4.0)
    (report,) = _take_in_processes(_postgres_env(), "test-penalty", 20, [2], delay_s=0)
    assert report["starts"][0] >= penalized_at + 4.0
    assert report["waits"][0] > 0  # it was the budget that held it, not a slow start


def test_a_shorter_penalty_never_shortens_a_longer_one(transactional_db: None) -> None:
    budget = CallBudget("test-penalties", 20)
    penalized_at = time.time()
    budget.penalize(10)
    budget.penalize(1)
    assert ProviderCallBudget.objects.get(name="test-penalties").next_slot_at >= penalized_at + 10


def test_an_unlimited_budget_writes_nothing(transactional_db: None) -> None:
    budget = CallBudget("test-unlimited", 0)
    started = time.monotonic()
    with CaptureQueriesContext(connection) as queries:
        waits = [budget.take() for _ in range(1000)]
        budget.penalize(30)
    assert waits == [0.0] * 1000
    assert time.monotonic() - started < 1
    assert len(queries) == 0
    assert not ProviderCallBudget.objects.exists()
    CallBudget("test-negative", -1).take()
    assert not ProviderCallBudget.objects.exists()


def test_a_limited_budget_is_one_statement_per_call(transactional_db: None) -> None:
    budget = CallBudget("test-one-statement", 10)
    spacing = (1 + WINDOW_MARGIN_S) / 10
    with CaptureQueriesContext(connection) as queries:
        first_asked = time.monotonic()
        first = budget.take()
        second_asked = time.monotonic()
        second = budget.take()
    assert len(queries) == 2
    assert all(q["sql"].startswith("INSERT INTO") for q in queries.captured_queries)
    # The first call starts at once; the second a tenth of a second (and the margin) after it:
    # it waits what is left of that once the time between the two calls (the database's clock,
    # so a loaded machine's gap, measured here, is allowed for) has passed.
    assert first == 0.0
    assert spacing - (second_asked - first_asked) - 0.05 < second <= spacing
    assert ProviderCallBudget.objects.get(name="test-one-statement").next_slot_at > time.time()


def test_budgets_from_settings(settings: Any) -> None:
    settings.RECONCILIATION_MAX_RPS = 20.0
    settings.VERIFICATION_MAX_RPS = 50.0
    assert budget_from_settings("reconciliation") == CallBudget("reconciliation", 20.0)
    assert budget_from_settings("verification") == CallBudget("verification", 50.0)
    settings.VERIFICATION_MAX_RPS = 0
    assert not budget_from_settings("verification").limited
    with pytest.raises(ValueError, match="no call budget 'webhooks'"):
        budget_from_settings("webhooks")
    with pytest.raises(ValueError, match="a budget's name"):
        CallBudget("x" * 51, 1)
