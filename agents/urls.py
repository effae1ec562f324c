"""Browser pages of the agent surface: the refund request confirmation page and the buyer's
connected assistants."""

from django.urls import URLPattern, URLResolver, path

from agents import views

app_name = "agents"
urlpatterns: list[URLPattern | URLResolver] = [
    path("refund-requests/<str:request_id>/", views.refund_request_page, name="refund-request"),
    path("assistants/", views.assistants_page, name="assistants"),
    path("assistants/<str:client_id>/revoke/", views.assistant_revoke, name="assistant-revoke"),
]
