"""config.urls plus views that fail on purpose, to test the API's error envelope."""

from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import urlpatterns as project_urlpatterns
from core.api.responses import ok
from core.exceptions import SessionRequired


class FailingApi(APIView):
    permission_classes = [AllowAny]

    class InputSerializer(serializers.Serializer):
        amount_micro = serializers.IntegerField(min_value=1)

    def get(self, request: Request) -> Response:
        raise RuntimeError("internal secret detail sk_test_should_never_leak")

    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return ok(serializer.validated_data, status=201)

    def put(self, request: Request) -> Response:
        raise SessionRequired()


def plain_failing_view(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("internal secret detail sk_test_should_never_leak")


urlpatterns = [
    path("api/v1/test-failing", FailingApi.as_view()),
    path("api/v1/test-plain-failing", plain_failing_view),
    *project_urlpatterns,
]
