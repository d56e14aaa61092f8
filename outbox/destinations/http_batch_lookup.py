"""The http kind's batch lookup answer (`POST /tasks/lookup`): which of the keys asked the receiver has a task
for, read by the contract. An answer that proves nothing about a key (not 200, no item list, an item that is
not a task, a task for a key not asked) is `LookupFailed` for the whole request: settlement then knows nothing
of those keys and asks again later, rather than taking "absent from a broken answer" for "not there"."""

from outbox.destinations.base import LookupFailed, RemoteTask, remote_task
from outbox.destinations.http_connections import Answer


def batch_lookup_answer(response: Answer, action_keys: list[str]) -> dict[str, RemoteTask | None]:
    """Each key asked: its task, or None when the receiver named it among the keys it has no task for."""
    if response.status_code in (401, 403):
        raise LookupFailed(f"receiver refused the credentials (HTTP {response.status_code})")
    if response.status_code != 200:
        raise LookupFailed(f"batch lookup answered HTTP {response.status_code}")
    try:
        document = response.json()
        tasks = [remote_task(item) for item in document["items"]]
        missing = set(document["missing"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LookupFailed(f"batch lookup answer is not a list of tasks: {exc}") from exc
    found = {task.action_key: task for task in tasks}
    asked = set(action_keys)
    if not set(found) <= asked:
        raise LookupFailed("batch lookup answered about keys that were not asked")
    if unanswered := asked - set(found) - missing:
        raise LookupFailed(f"batch lookup said nothing about {len(unanswered)} of the keys asked")
    return {key: found.get(key) for key in action_keys}
