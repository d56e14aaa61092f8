"""The audit export: the page and the download it posts to."""

from django.urls import path

from console.views import audit_export as views

app_name = "audit"

urlpatterns = [
    path("", views.audit_export_page, name="export"),
    path("export", views.audit_export_download, name="download"),
]
