"""The request type of console views: Django's request with django-htmx's details attached by its middleware."""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
