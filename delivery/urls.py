from django.urls import path

from delivery import api

app_name = "delivery"

urlpatterns = [
    path("api/tasks", api.tasks, name="tasks"),
    path("api/tasks/batch", api.tasks_batch, name="tasks-batch"),
    path("api/tasks/<path:action_key>", api.task_detail, name="task-detail"),
]
