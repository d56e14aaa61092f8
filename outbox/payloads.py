"""Canonical form and hash of a payload: what an approval binds to and what a receipt echoes."""

import hashlib
import json
from typing import Any


def canonical_json(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def payload_hash(payload: Any) -> str:
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def holds_sent(sent: Any, answer: Any) -> bool:
    """Whether `answer` holds what was sent: every key of a sent object, recursively, with an equal value;
    the answer's other keys (a provider's own `id`, `object`, `created`) are ignored. Lists and other values
    compare whole."""
    if isinstance(sent, dict):
        return isinstance(answer, dict) and all(
            key in answer and holds_sent(value, answer[key]) for key, value in sent.items()
        )
    if isinstance(sent, bool) or isinstance(answer, bool):
        return sent is answer
    if isinstance(sent, int | float) and isinstance(answer, int | float):
        return sent == answer
    return type(sent) is type(answer) and sent == answer
