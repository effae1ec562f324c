"""The authorization server's routes (helper A fills in): /o/… (django-oauth-toolkit) and the
well-known metadata documents at the site root."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
