"""Test clients of the console."""

from django.test import Client

# The header htmx sends with every request it makes.
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(user) -> Client:
    """A client signed in as `user`."""
    client = Client()
    client.force_login(user)
    return client


def row_of(page: str, element_id: str) -> str:
    """The table row of `page` whose id is `element_id`: from that id to the row's end."""
    start = page.find(f'id="{element_id}"')
    assert start != -1, f"{element_id} is not on the page"
    return page[start : page.index("</tr>", start)]
