"""The API route table. Declare each API route once, here (by including an app's `api/urls.py`);
config/urls.py serves this table at both /api/v1/ and the unversioned /api/ alias."""

from django.urls import include, path

urlpatterns = [
    path("", include("accounts.api.urls")),
    path("", include("envelopes.api.urls")),
    path("", include("disputes.api.urls")),
]
