"""Benchmarks and the soak (`bench/*.py`): the test settings, plus a Celery queue named by the
environment, so that runs sharing one Redis (a soak in CI beside a developer's) never take each
other's tasks."""

from .base import env
from .test import *
from .test import DATABASES

CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
# Stripe's rate budgets on, as in production: the benches measure Vouch under them.
STRIPE_RATE_LIMITS = env.str("STRIPE_RATE_LIMITS", default="auto")
# Connections kept open between requests where a bench asks (CONN_MAX_AGE, seconds), as
# production keeps them (its pool, or CONN_MAX_AGE without one): the test settings open a new one
# for every request, and at a hundred requests a second PostgreSQL spends a core starting them.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# psycopg's pool, as production has it (config/settings/production.py), for the processes that
# ask (`--topology`'s ASGI nodes): there every request's database work runs in a thread of its
# own, and without a pool each holds a connection of its own until PostgreSQL refuses the rest.
if env.bool("DATABASE_POOL", default=False):
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        "timeout": env.float("DATABASE_POOL_TIMEOUT_S", default=10.0),
    }
