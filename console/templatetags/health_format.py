from django import template

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """Seconds as the largest two units an on-call person reads at a glance: '2 h 5 min', '40 s', '—'."""
    if seconds is None or seconds == "":
        return "—"
    seconds = int(round(float(seconds)))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0 s"


@register.filter
def percent(ratio) -> str:
    return f"{float(ratio) * 100:.1f}%"
