from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import auth_method_of
from core import exceptions
from core.api.responses import error_responses, ok, success_envelope


@method_decorator(ensure_csrf_cookie, name="dispatch")
class MeApi(APIView):
    """Also sets the `csrftoken` cookie, so a session client learns the token its unsafe
    requests must send as `X-CSRFToken`."""

    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        is_staff = serializers.BooleanField(help_text="Operations staff.")
        auth_method = serializers.ChoiceField(
            choices=["session", "bearer"], help_text="How this request was authenticated."
        )

    @extend_schema(
        operation_id="me_retrieve",
        summary="Who am I",
        description=(
            "The caller's username, staff flag and how this request authenticated. Sets the "
            "`csrftoken` cookie that unsafe session requests echo in `X-CSRFToken`."
        ),
        responses={
            200: success_envelope(OutputSerializer, name="MeEnvelope"),
            **error_responses(exceptions.NotAuthenticated, exceptions.AuthenticationFailed),
        },
    )
    def get(self, request: Request) -> Response:
        data = {
            "username": request.user.get_username(),
            "is_staff": request.user.is_staff,
            "auth_method": auth_method_of(request),
        }
        return ok(self.OutputSerializer(data).data)
