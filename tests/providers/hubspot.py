"""A HubSpot-style CRM for the tests: contacts created with a `{"properties": …}` body, one property kept
unique, written from HubSpot's public docs (https://developers.hubspot.com/docs/api/crm/contacts,
https://developers.hubspot.com/docs/api/crm/search, https://developers.hubspot.com/docs/api/crm/properties
("hasUniqueValue"), https://developers.hubspot.com/docs/api/usage-details#rate-limits):

    POST /crm/v3/objects/contacts   Authorization: Bearer <private app token>, {"properties": {…}}
        -> 201 {"id": "…", "properties": {…, "hs_object_id", "createdate", "lastmodifieddate"},
                "createdAt", "updatedAt", "archived": false}
        -> 409 {"status": "error", "message": "Contact already exists. Existing ID: <id>",
                "category": "CONFLICT", …} when the unique property `handoff_key` already holds the value
    POST /crm/v3/objects/contacts/search  {"filterGroups": [{"filters": [{"propertyName", "operator": "EQ",
                "value"}]}], "properties": [...]}  -> 200 {"total": n, "results": [{"id", "properties"}]}
    GET    /crm/v3/objects/contacts/<id>?properties=lifecyclestage  -> 200 {"id", "properties": {the
                default ones and those asked for}, …}, or 404 {"category": "OBJECT_NOT_FOUND", …} (archived)
    DELETE /crm/v3/objects/contacts/<id>  -> 204 (archived; https://developers.hubspot.com/docs/api/crm/contacts
                "Archive a contact")

A contact created without a `lifecyclestage` gets `lead` (the portal's default stage); switch
`lifecyclestage`: {key: value} moves a contact on (HubSpot's internal values: `subscriber`, `lead`, …,
`customer`). A wrong private app token is answered 401 INVALID_AUTHENTICATION. Faults: `search_down`: n
answers 503 to the next n searches; `rate_limited`: n answers 429 {"errorType": "RATE_LIMIT", …} with
`Retry-After: 1` to the next n creates. Values of properties are kept and answered as texts, as HubSpot
does. An effect is a live contact; they are counted per `handoff_key` (an archived one is not counted).
"""

from tests.providers.harness import Answer, Call, Provider, serve, token_from_environment

CONTACTS = "/crm/v3/objects/contacts"
SEARCH = CONTACTS + "/search"
UNIQUE = "handoff_key"
DEFAULT_PROPERTIES = ("hs_object_id", "createdate", "lastmodifieddate")


class HubSpot(Provider):
    def __init__(self, token: str | None):
        super().__init__(token)
        self.contacts: dict[str, dict] = {}
        self.issued = 5100
        self.rate_limited = 0
        self.search_down = 0

    def unauthorized(self) -> Answer:
        return Answer(
            401, _error("Authentication credentials not found.", "INVALID_AUTHENTICATION")
        )

    def set_faults(self, faults: dict) -> None:
        self.rate_limited += faults.get("rate_limited", 0)
        self.search_down += faults.get("search_down", 0)
        for key, stage in faults.get("lifecyclestage", {}).items():
            for contact in self.contacts.values():
                if contact["properties"].get(UNIQUE) == key:
                    contact["properties"]["lifecyclestage"] = stage

    def route(self, call: Call) -> Answer:
        if call.path == CONTACTS and call.method == "POST":
            return self._create(call.body)
        if call.path == SEARCH and call.method == "POST":
            return self._search(call.body)
        if call.path.startswith(CONTACTS + "/") and call.method == "GET":
            return self._read(call.path[len(CONTACTS) + 1 :], call.query.get("properties", ""))
        if call.path.startswith(CONTACTS + "/") and call.method == "DELETE":
            self.contacts.pop(call.path[len(CONTACTS) + 1 :], None)
            return Answer(204, committed=True)
        return Answer(404, _error(f"Unable to route {call.method} {call.path}", "OBJECT_NOT_FOUND"))

    def _create(self, body: object) -> Answer:
        if self.rate_limited > 0:
            self.rate_limited -= 1
            return Answer(
                429,
                {
                    "status": "error",
                    "message": "You have reached your secondly limit.",
                    "errorType": "RATE_LIMIT",
                    "policyName": "SECONDLY",
                },
                {"Retry-After": "1"},
            )
        properties = body.get("properties") if isinstance(body, dict) else None
        if not isinstance(properties, dict):
            return Answer(
                400, _error("Invalid input JSON: properties required", "VALIDATION_ERROR")
            )
        value = properties.get(UNIQUE)
        existing = next(
            (c for c in self.contacts.values() if value and c["properties"].get(UNIQUE) == value),
            None,
        )
        if existing is not None:
            return Answer(
                409, _error(f"Contact already exists. Existing ID: {existing['id']}", "CONFLICT")
            )
        self.issued += 1
        contact_id = str(self.issued)
        stamp = "2026-12-05T12:00:00.000Z"
        self.contacts[contact_id] = {
            "id": contact_id,
            "properties": {
                "lifecyclestage": "lead",
                **{name: str(v) for name, v in properties.items()},
                "hs_object_id": contact_id,
                "createdate": stamp,
                "lastmodifieddate": stamp,
            },
            "createdAt": stamp,
            "updatedAt": stamp,
            "archived": False,
        }
        return Answer(201, self.contacts[contact_id], committed=True)

    def _read(self, contact_id: str, asked: str) -> Answer:
        contact = self.contacts.get(contact_id)
        if contact is None:
            return Answer(
                404, _error("Object not found. objectId are usually numeric.", "OBJECT_NOT_FOUND")
            )
        wanted = (
            set(asked.split(",")) | set(DEFAULT_PROPERTIES) | {"email", "firstname", "lastname"}
        )
        properties = {k: v for k, v in contact["properties"].items() if k in wanted}
        return Answer(200, {**contact, "properties": properties})

    def _search(self, body: object) -> Answer:
        if self.search_down > 0:
            self.search_down -= 1
            return Answer(503, _error("Service unavailable", "SERVICE_UNAVAILABLE"))
        try:
            [group] = body["filterGroups"]
            filters = group["filters"]
            wanted = set(body.get("properties") or ()) | set(DEFAULT_PROPERTIES)
        except (KeyError, TypeError, ValueError):
            return Answer(400, _error("Invalid search request", "VALIDATION_ERROR"))
        found = [
            c
            for c in self.contacts.values()
            if all(
                f.get("operator") == "EQ"
                and c["properties"].get(f.get("propertyName")) == f.get("value")
                for f in filters
            )
        ]
        results = [
            {
                "id": c["id"],
                "properties": {k: v for k, v in c["properties"].items() if k in wanted},
                "createdAt": c["createdAt"],
                "updatedAt": c["updatedAt"],
                "archived": False,
            }
            for c in found
        ]
        return Answer(200, {"total": len(results), "results": results})

    def records(self) -> list[dict]:
        return list(self.contacts.values())

    def effects(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for contact in self.contacts.values():
            key = contact["properties"].get(UNIQUE, "")
            counted[key] = counted.get(key, 0) + 1
        return counted


def _error(message: str, category: str) -> dict:
    return {
        "status": "error",
        "message": message,
        "correlationId": "00000000-0000-4000-8000-000000000000",
        "category": category,
    }


if __name__ == "__main__":
    serve(HubSpot(token_from_environment()))
