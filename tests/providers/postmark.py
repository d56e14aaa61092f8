"""A Postmark-style transactional e-mail API for the tests: no idempotency at all, its sent messages
searchable by metadata, written from Postmark's public docs (https://postmarkapp.com/developer/api/email-api,
https://postmarkapp.com/developer/api/messages-api, https://postmarkapp.com/support/article/1125-custom-metadata-faq,
https://postmarkapp.com/developer/api/overview#response-codes):

    POST /email   X-Postmark-Server-Token: <token>, {"From", "To", "Subject", "TextBody", "Metadata": {…},
                  "MessageStream"}  -> 200 {"To", "SubmittedAt", "MessageID", "ErrorCode": 0, "Message": "OK"}
                  (a second identical request is a second message: nothing is deduplicated)
    GET  /messages/outbound?count=N&offset=M&metadata_<name>=<value>
        -> 200 {"TotalCount": n, "Messages": [{"MessageID", "To": [{"Email", "Name"}], "Recipients",
                "From", "Subject", "Metadata", "Status": "Sent", "ReceivedAt", "MessageStream", …}]}

Errors answer 422 {"ErrorCode": 300, "Message": …} (invalid request), 401 {"ErrorCode": 10, …}. An effect
is a message sent; they are counted per `Metadata.handoff_key`. Fault `lose_message`: n: the next n sends
are not listed by the search and their answers are lost.
"""

from tests.providers.harness import Answer, Call, Provider, serve, token_from_environment

SENT_AT = "2026-12-05T07:00:00.0000000-05:00"


class Postmark(Provider):
    def __init__(self, token: str | None):
        super().__init__(token)
        self.messages: list[dict] = []
        self.lose_message = 0

    def set_faults(self, faults: dict) -> None:
        self.lose_message += faults.get("lose_message", 0)

    def authorized(self, call: Call) -> bool:
        return self.token is None or call.headers.get("x-postmark-server-token") == self.token

    def unauthorized(self) -> Answer:
        return Answer(
            401, {"ErrorCode": 10, "Message": "No Account or Server API tokens were supplied"}
        )

    def route(self, call: Call) -> Answer:
        if call.path == "/email" and call.method == "POST":
            return self._send(call.body)
        if call.path == "/messages/outbound" and call.method == "GET":
            return self._search(call.query)
        return Answer(404, {"ErrorCode": 404, "Message": "Not found"})

    def _send(self, email: object) -> Answer:
        if not isinstance(email, dict) or not all(email.get(f) for f in ("From", "To", "Subject")):
            return Answer(422, {"ErrorCode": 300, "Message": "Invalid email request"})
        metadata = email.get("Metadata") or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            return Answer(422, {"ErrorCode": 300, "Message": "Metadata values must be texts"})
        message_id = f"0a129aee-e1cd-480d-b08d-{len(self.messages) + 1:012d}"
        if self.lose_message > 0:
            # Accepted but not listed (yet), and the answer is lost: the search cannot tell.
            self.lose_message -= 1
            self.drops += 1
        else:
            self.messages.append({**email, "Metadata": metadata, "MessageID": message_id})
        answer = {
            "To": email["To"],
            "SubmittedAt": SENT_AT,
            "MessageID": message_id,
            "ErrorCode": 0,
            "Message": "OK",
        }
        return Answer(200, answer, committed=True)

    def _search(self, query: dict[str, str]) -> Answer:
        try:
            count, offset = int(query["count"]), int(query["offset"])
        except (KeyError, ValueError):
            return Answer(422, {"ErrorCode": 300, "Message": "count and offset are required"})
        wanted = {k[len("metadata_") :]: v for k, v in query.items() if k.startswith("metadata_")}
        found = [
            m for m in self.messages if all(m["Metadata"].get(k) == v for k, v in wanted.items())
        ]
        page = [_summary(m) for m in reversed(found)][offset : offset + count]
        return Answer(200, {"TotalCount": len(found), "Messages": page})

    def records(self) -> list[dict]:
        return list(self.messages)

    def effects(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for message in self.messages:
            key = message["Metadata"].get("handoff_key", "")
            counted[key] = counted.get(key, 0) + 1
        return counted


def _summary(message: dict) -> dict:
    """A message as the search lists it: no bodies (the details endpoint has those)."""
    recipients = [r.strip() for r in message["To"].split(",")]
    return {
        "Tag": message.get("Tag", ""),
        "MessageID": message["MessageID"],
        "MessageStream": message.get("MessageStream", "outbound"),
        "To": [{"Email": r, "Name": None} for r in recipients],
        "Cc": [],
        "Bcc": [],
        "Recipients": recipients,
        "ReceivedAt": SENT_AT,
        "From": message["From"],
        "Subject": message["Subject"],
        "Attachments": [],
        "Status": "Sent",
        "TrackOpens": False,
        "TrackLinks": "None",
        "Metadata": message["Metadata"],
        "Sandboxed": False,
    }


if __name__ == "__main__":
    serve(Postmark(token_from_environment()))
