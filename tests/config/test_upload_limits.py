"""Uploads bounded before Django reads them (config/upload_limits.py, ASVS 5.0 5.2.1): the observation CSV
import over its limit answers 413 with the reason and nothing of its body is read, by any middleware or view;
one without a Content-Length answers 411; one within the limit is imported as before."""

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import BOUNDARY, MULTIPART_CONTENT, FakePayload, encode_multipart
from django.urls import reverse

from approvals.models import ObservedOutcome
from tests.approvals.observation_world import observed_world
from tests.console.clients import client_for


class CountedBody(FakePayload):
    """The request's body as the server hands it over, counting what the application reads of it."""

    def __init__(self, content: bytes):
        super().__init__(content)
        self.bytes_read = 0

    def read(self, size=-1):
        chunk = super().read(size)
        self.bytes_read += len(chunk)
        return chunk

    def readline(self, size=-1):
        line = super().readline(size)
        self.bytes_read += len(line)
        return line


@pytest.fixture
def world(db):
    return observed_world()


def _upload(client, content: bytes, **environ):
    body = encode_multipart(BOUNDARY, {"file": SimpleUploadedFile("o.csv", content)})
    counted = CountedBody(body)
    answer = client.generic(
        "POST",
        reverse("observation:import", args=[7, "onboarding-v1"]),
        body,
        content_type=MULTIPART_CONTENT,
        **{"wsgi.input": counted, **environ},
    )
    return answer, counted


def _csv_of(world, size: int) -> bytes:
    """An outcomes CSV of one row whose outcome is `size` characters long."""
    head = f"action_key,task_created,outcome\n{world['cases'][0]},yes,{'x' * size}\n"
    return head.encode()


def test_an_upload_over_the_limit_is_413_with_the_reason_and_its_body_is_never_read(world):
    answer, body = _upload(client_for(world["olga"]), _csv_of(world, 1024 * 1024))

    assert answer.status_code == 413
    text = answer.content.decode()
    limit = settings.UPLOAD_MAX_BODY_BYTES
    assert f"at most {limit} bytes ({limit // 1024} KiB) in one upload" in text
    assert "Nothing was read or done" in text
    assert body.bytes_read == 0
    assert not ObservedOutcome.objects.exists()


def test_an_upload_without_a_content_length_is_411_and_unread(world):
    answer, body = _upload(client_for(world["olga"]), _csv_of(world, 10), CONTENT_LENGTH="")
    assert answer.status_code == 411
    assert body.bytes_read == 0
    assert not ObservedOutcome.objects.exists()


def test_an_upload_within_the_limit_is_read_and_imported(world):
    answer, body = _upload(client_for(world["olga"]), _csv_of(world, 10))
    assert answer.status_code == 302
    assert body.bytes_read > 0
    assert ObservedOutcome.objects.current().count() == 1
