from django.urls import path

from disputes.api import views

urlpatterns = [
    path("disputes", views.DisputeListApi.as_view(), name="disputes"),
    path("disputes/<str:dispute_id>", views.DisputeDetailApi.as_view(), name="dispute"),
    path(
        "disputes/<str:dispute_id>/evidence",
        views.EvidenceApi.as_view(),
        name="dispute-evidence",
    ),
    path("disputes/<str:dispute_id>/packet", views.PacketApi.as_view(), name="dispute-packet"),
]
