"""Browser pages of the agent surface: the refund request confirmation page and the buyer's
connected assistants."""

from django.urls import URLPattern, URLResolver, path

from agents import views

app_name = "agents"
urlpatterns: list[URLPattern | URLResolver] = [
    path("refund-requests/<str:request_id>/", views.refund_request_page, name="refund-request"),
    path("assistants/", views.assistants_page, name="assistants"),
    # The client id travels in the form body, not the path: a metadata document's client id is an
    # https URL whose `/` no path converter holds safely (a proxy merging `//` would change it).
    path("assistants/revoke/", views.assistant_revoke, name="assistant-revoke"),
]
