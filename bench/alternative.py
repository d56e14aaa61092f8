"""The usual alternative, for comparison only: no outbox, a django-q2 task queued after commit that
posts the approved request to the receiver. What a Django team typically writes first."""


def deliver_request(request_id: int) -> str:
    from approvals.models import Request
    from outbox.destinations import get_destination
    from outbox.failures import Outgoing
    from outbox.payloads import payload_hash

    request = Request.objects.get(pk=request_id)
    key = f"onboarding:{request.workspace_id}:{request.number}:{request.revision}"
    result = get_destination().deliver(
        Outgoing(key, request.payload, payload_hash(request.payload))
    )
    if not result.delivered:
        raise RuntimeError(f"{key}: {result.failure_class} {result.reason_code}")
    return result.task_id
