"""How `manage.py handoffs` prints: JSON (one object) with --json, else lines for a person."""

import json


def as_json(result: dict) -> str:
    return json.dumps(result, default=str, sort_keys=True)


def as_text(subcommand: str, result: dict) -> str:
    if subcommand == "list":
        return _rows(result)
    if subcommand == "show":
        return _page(result)
    return result["text"]


def _rows(result: dict) -> str:
    lines = [
        f"{r['id']:>8}  {r['state']:<16} {r['attempts']:>3}  {r['action_key']:<40} "
        f"{r['failure_class'] or '-':<11} {r['destination']:<12} {r['owner'] or '-'}"
        + (f"  {r['held']}" if r.get("held") else "")
        for r in result["handoffs"]
    ]
    if result["next"]:
        lines.append(f"more: --after {result['next']}")
    return "\n".join(lines) or "no handoff matches"


def _page(result: dict) -> str:
    lines = [
        f"{name}: {result[name]}"
        for name in (
            "id",
            "action_key",
            "workspace",
            "state",
            "attempts",
            "failure_class",
            "reason_code",
            "destination",
            "destination_task_id",
            "owner",
            "source",
        )
    ]
    if result.get("hold"):
        lines.append(f"hold: {result['hold']}")
    lines += [
        f"next step: {result['next_step']['headline']}",
        f"actions: {', '.join(result['actions']) or '-'}",
    ]
    lines += [f"payload: {json.dumps(result['payload'], sort_keys=True)}", "history:"]
    lines += [
        f"  {e['at']}  {e['actor']:<12} {e['from'] or '-'} -> {e['to']}  {e['action']}  {e['reason']}"
        for e in result["events"]
    ]
    return "\n".join(lines)
