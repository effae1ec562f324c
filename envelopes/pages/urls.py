"""The buyer's own pages (SPEC §10.1), mounted at /escrow/ with namespace "buyer"."""

from django.urls import URLPattern, URLResolver, path

from envelopes.pages import views

app_name = "buyer"
urlpatterns: list[URLPattern | URLResolver] = [
    path("envelopes/", views.envelope_list, name="envelopes"),
    path("envelopes/<str:envelope_id>/", views.envelope_detail, name="envelope"),
    path("envelopes/<str:envelope_id>/refund/", views.refund_form, name="envelope-refund"),
]
