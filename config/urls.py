from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from console.views import requests as request_views

urlpatterns = [
    path("", request_views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("approvals/api/", include("console.urls.intake")),
    path("approvals/", include("console.urls.requests")),
    path("handoffs/", include("console.urls.handoffs")),
    path("destinations/", include("console.urls.destinations")),
    path("delivery/", include("delivery.urls")),
    # Reconciliation runs and findings, the health dashboard and /metrics.
    path("", include("console.urls.reconciliation")),
]
