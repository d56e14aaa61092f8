"""{{ value|json_pretty }}: a payload shown as the JSON that is sent, indented, keys sorted.

Callers pass values that went through the redaction function already."""

import json

from django import template

register = template.Library()


@register.filter
def json_pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
