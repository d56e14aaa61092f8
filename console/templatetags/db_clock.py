"""`{% load db_clock %}`: Django's `timesince` and `timeuntil` filters measured from the database's "now".

Every time a page shows was stored on the database clock (`outbox/clock.py`); Django's own filters measure
from the web host's clock, so on a host 30 s off an age or a wait is off by as much, and a time written a
moment ago can read as being in the future. Loaded after the built-ins, these take their names: a template
that loads this library keeps writing `{{ x|timesince }}` and gets the database's clock
(`outbox.page_clock.page_now`: no query per page nor per row). With an argument they compare with it, as
Django's do.
`tests/console/test_db_clock_display_templates.py` checks that every template using them loads this library.
"""

from django import template
from django.template.defaultfilters import timesince_filter, timeuntil_filter

from outbox.page_clock import page_now

register = template.Library()


@register.filter("timesince", is_safe=False)
def timesince_db(value, arg=None) -> str:
    """How long ago `value` was, on the database clock ("4 days, 6 hours")."""
    if not value:
        return ""
    return timesince_filter(value, arg or page_now())


@register.filter("timeuntil", is_safe=False)
def timeuntil_db(value, arg=None) -> str:
    """How long until `value`, on the database clock ("4 days, 6 hours")."""
    if not value:
        return ""
    return timeuntil_filter(value, arg or page_now())


@register.filter("seconds_ago", is_safe=False)
def seconds_ago_db(value) -> int | str:
    """Whole seconds since `value` on the database clock (0 for a time not yet reached), for ages a person
    reads in seconds: how old a page's shared figures are."""
    if not value:
        return ""
    return max(0, int((page_now() - value).total_seconds()))
