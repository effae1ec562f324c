"""The operations endpoints. Plain Django views outside the API (no session, no CSRF, no
envelope): load balancers, orchestrators and Prometheus call them."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ops.access import metrics_allowed, metrics_enabled
from ops.collectors import metrics_exposition
from ops.readiness import readiness_check


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """The process is alive and serving: no database, no broker, no I/O."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    """200 when the database answers, its migrations are applied and the broker is reachable;
    503 naming the check that failed."""
    readiness = readiness_check()
    return JsonResponse(
        {"status": "ready" if readiness.ready else "unavailable", "checks": readiness.checks},
        status=200 if readiness.ready else 503,
    )


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_enabled():
        raise Http404
    if not metrics_allowed(request):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    body, content_type = metrics_exposition()
    return HttpResponse(body, content_type=content_type)
