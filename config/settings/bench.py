"""Benchmarks and the soak (`bench/*.py`): the test settings, plus a Celery queue named by the
environment, so that runs sharing one Redis (a soak in CI beside a developer's) never take each
other's tasks."""

from .base import env
from .test import *

CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
# Stripe's rate budgets on, as in production: the benches measure Vouch under them.
STRIPE_RATE_LIMITS = env.str("STRIPE_RATE_LIMITS", default="auto")
