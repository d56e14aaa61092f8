"""URLs of reconciliation, the health dashboard and /metrics."""

app_name = "reconciliation"

urlpatterns: list = []
