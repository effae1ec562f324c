from django.urls import path

from envelopes.api import views

urlpatterns = [
    path("escrow/envelopes", views.EnvelopeListCreateApi.as_view(), name="envelopes"),
    path("escrow/envelopes/<str:envelope_id>", views.EnvelopeDetailApi.as_view(), name="envelope"),
    path(
        "escrow/envelopes/<str:envelope_id>/top-ups",
        views.TopUpApi.as_view(),
        name="envelope-top-ups",
    ),
    path(
        "escrow/envelopes/<str:envelope_id>/debits",
        views.DebitApi.as_view(),
        name="envelope-debits",
    ),
    path(
        "escrow/envelopes/<str:envelope_id>/refund",
        views.RefundApi.as_view(),
        name="envelope-refund",
    ),
    path(
        "escrow/envelopes/<str:envelope_id>/refunds",
        views.EnvelopeRefundsApi.as_view(),
        name="envelope-refunds",
    ),
    path("escrow/refunds/<str:refund_id>", views.RefundDetailApi.as_view(), name="refund"),
]
