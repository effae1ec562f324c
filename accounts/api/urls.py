from django.urls import path

from accounts.api.views import MeApi

urlpatterns = [
    path("me", MeApi.as_view(), name="me"),
]
