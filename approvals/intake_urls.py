"""URLs of the signed trigger intake (POST /approvals/api/triggers)."""

app_name = "intake"

urlpatterns: list = []
