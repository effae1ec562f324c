"""Browser pages of the agent surface: the refund request confirmation page."""

from django.urls import URLPattern, URLResolver, path

from agents import views

app_name = "agents"
urlpatterns: list[URLPattern | URLResolver] = [
    path("refund-requests/<str:request_id>/", views.refund_request_page, name="refund-request"),
]
