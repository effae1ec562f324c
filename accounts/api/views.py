from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import auth_method_of
from accounts.selectors import user_email_verified
from core import exceptions
from core.api.permissions import caller
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
        email_verified = serializers.BooleanField(
            help_text="The caller confirmed an e-mail address: moving money needs it "
            "(else 403 `email_unverified`)."
        )

    @extend_schema(
        operation_id="me_retrieve",
        summary="Who am I",
        description=(
            "The caller's username, staff flag, how this request authenticated and whether "
            "their e-mail address is confirmed. Sets the "
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
            "email_verified": user_email_verified(user=caller(request)),
        }
        return ok(self.OutputSerializer(data).data)
