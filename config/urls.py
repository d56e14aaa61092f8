from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from approvals import views as approval_views

urlpatterns = [
    path("", approval_views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("approvals/api/", include("approvals.intake_urls")),
    path("approvals/", include("approvals.urls")),
    path("handoffs/", include("outbox.urls")),
    path("delivery/", include("delivery.urls")),
    # Reconciliation runs and findings, the health dashboard and /metrics.
    path("", include("reconciliation.urls")),
]
