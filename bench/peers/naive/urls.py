from django.urls import path

from naive.refunds import views

urlpatterns = [
    path("api/me", views.Me.as_view()),
    path("api/refunds", views.RefundCreate.as_view()),
]
