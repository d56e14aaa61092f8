from django.urls import path

from delivery import accounts_api, api, mailbox_views

app_name = "delivery"

urlpatterns = [
    path("api/tasks", api.tasks, name="tasks"),
    path("api/tasks/batch", api.tasks_batch, name="tasks-batch"),
    path("api/tasks/lookup", api.tasks_lookup, name="tasks-lookup"),
    # Before the lookup: its <path:> would take "<key>/status" for a key.
    path("api/tasks/<path:action_key>/status", api.task_status, name="task-status"),
    path("api/tasks/<path:action_key>", api.task_detail, name="task-detail"),
    # The bundled accounts service: a second receiving system, on the IETF Idempotency-Key draft.
    path("accounts/v1/accounts", accounts_api.account_collection, name="accounts"),
    path(
        "accounts/v1/accounts/<str:account_id>",
        accounts_api.account_item,
        name="account",
    ),
    # The demo's mailbox (the e-mail destination's messages), when DEMO_MAILBOX_DIR is set.
    path("mailbox/", mailbox_views.mailbox, name="mailbox"),
]
