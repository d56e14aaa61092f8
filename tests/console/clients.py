"""Test clients of the console."""

from django.test import Client

# The header htmx sends with every request it makes.
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(user) -> Client:
    """A client signed in as `user`."""
    client = Client()
    client.force_login(user)
    return client
