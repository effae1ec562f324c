"""Browser pages of the agent surface: the refund request confirmation page."""

from django.urls import URLPattern, URLResolver

app_name = "agents"
urlpatterns: list[URLPattern | URLResolver] = []
