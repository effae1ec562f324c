"""The console's own admin pages beside the stock admin's (config/urls.py includes them under
/admin/search/, before `admin.site.urls`): staff only, as every admin page."""

from django.contrib import admin
from django.urls import path

from ops.admin_views import console_search

urlpatterns = [
    path("", admin.site.admin_view(console_search), name="admin-search"),
]
