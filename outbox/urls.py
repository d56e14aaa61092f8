from django.urls import path

from outbox import views

app_name = "outbox"

urlpatterns = [
    path("", views.handoff_list, name="list"),
    path("<int:pk>/", views.handoff_detail, name="detail"),
]
