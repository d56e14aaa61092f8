"""A Salesforce-style CRM for the tests: a create is an upsert by an external id in the path, its client an
OAuth2 client credentials flow, written from Salesforce's REST API docs (https://developer.salesforce.com/docs/
atlas.en-us.api_rest.meta/api_rest/dome_upsert.htm, …/resources_sobject_upsert.htm, …/dome_delete_record.htm,
…/errorcodes.htm) and its OAuth docs (https://help.salesforce.com/s/articleView?id=sf.remoteaccess_oauth_client_credentials_flow.htm):

    POST   /services/oauth2/token   form: grant_type=client_credentials, client_id, client_secret
        -> 200 {"access_token", "instance_url", "id", "token_type": "Bearer", "issued_at", "signature",
                "scope"}: no `expires_in` (the session lasts the org's session timeout; an expired one is
                answered 401 INVALID_SESSION_ID), or 400 {"error": "invalid_client", "error_description"}
    PATCH  /services/data/v60.0/sobjects/Account/External_Id__c/K   a JSON object of Account fields
        -> 201 {"id": "001…", "success": true, "errors": [], "created": true}   (no record had K)
        -> 200 {"id": "001…", "success": true, "errors": [], "created": false}  (the record with K updated)
    GET    /services/data/v60.0/sobjects/Account/External_Id__c/K  (or …/Account/<Id>)
        -> 200 {"attributes": {"type": "Account", "url": …}, "Id": …, "External_Id__c": K, …fields,
                "Status__c": "New"}, or 404 [{"errorCode": "NOT_FOUND", "message": …}]
    DELETE /services/data/v60.0/sobjects/Account/<Id>   -> 204, or 404 [{"errorCode": "NOT_FOUND", …}]

The client secret is PROVIDER_TOKEN (the consumer key is CONSUMER_KEY); the API takes the sessions it
issued. `Status__c` is the record's own status field (switch `status`: {key: value}). Faults: `no_content`:
true answers an update 204 without a body, as API versions before 46.0 did; `session_calls`: n, each
session answers n API calls, then is expired (a session timeout, counted in calls instead of minutes);
`revoked`: true, the connected app's access revoked: its sessions end and its client is refused. An effect
is a live Account record; they are counted per external id (a deleted record is not counted).
"""

from urllib.parse import parse_qs

from tests.providers.harness import Answer, Call, Provider, serve, token_from_environment

API = "/services/data/v60.0/sobjects/Account/"
BY_EXTERNAL_ID = API + "External_Id__c/"
TOKEN_PATH = "/services/oauth2/token"
CONSUMER_KEY = "3MVG9handoffConsumerKey"
ORG = "00DT0000000handoff"
NOT_FOUND = [{"errorCode": "NOT_FOUND", "message": "The requested resource does not exist"}]


class Salesforce(Provider):
    def __init__(self, token: str | None):
        super().__init__(token)
        self.accounts: dict[str, dict] = {}  # by Id
        self.issued = 0
        self.no_content = False
        self.sessions: dict[str, int] = {}  # session -> API calls it answered
        self.session_calls: int | None = None
        self.revoked = False

    def authorized(self, call: Call) -> bool:
        if call.path == TOKEN_PATH:
            return True
        session = call.headers.get("authorization", "").removeprefix("Bearer ")
        if self.revoked or session not in self.sessions:
            return False
        if self.session_calls is not None and self.sessions[session] >= self.session_calls:
            return False  # timed out
        self.sessions[session] += 1
        return True

    def unauthorized(self) -> Answer:
        return Answer(
            401, [{"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}]
        )

    def set_faults(self, faults: dict) -> None:
        self.no_content = faults.get("no_content", self.no_content)
        self.session_calls = faults.get("session_calls", self.session_calls)
        self.revoked = faults.get("revoked", self.revoked)
        for key, status in faults.get("status", {}).items():
            if record := self._by_external_id(key):
                record["Status__c"] = status

    def _by_external_id(self, key: str) -> dict | None:
        return next((r for r in self.accounts.values() if r["External_Id__c"] == key), None)

    def route(self, call: Call) -> Answer:
        if call.path == TOKEN_PATH and call.method == "POST":
            return self._token(call)
        if call.path.startswith(BY_EXTERNAL_ID):
            key = call.path[len(BY_EXTERNAL_ID) :]
            if call.method == "PATCH":
                return self._upsert(key, call.body)
            if call.method == "GET":
                record = self._by_external_id(key)
                return Answer(200, record) if record else Answer(404, NOT_FOUND)
        elif call.path.startswith(API) and call.method == "GET":
            record = self.accounts.get(call.path[len(API) :])
            return Answer(200, record) if record else Answer(404, NOT_FOUND)
        elif call.path.startswith(API) and call.method == "DELETE":
            if self.accounts.pop(call.path[len(API) :], None) is None:
                return Answer(404, NOT_FOUND)
            return Answer(204, committed=True)
        return Answer(404, NOT_FOUND)

    def _token(self, call: Call) -> Answer:
        form = {
            k: v[0] for k, v in parse_qs(call.body if isinstance(call.body, str) else "").items()
        }
        if form.get("grant_type") != "client_credentials":
            return Answer(
                400,
                {
                    "error": "unsupported_grant_type",
                    "error_description": "grant type not supported",
                },
            )
        client = (form.get("client_id"), form.get("client_secret"))
        if self.revoked or client != (CONSUMER_KEY, self.token):
            return Answer(
                400, {"error": "invalid_client", "error_description": "invalid client credentials"}
            )
        session = f"{ORG}!AQ{len(self.sessions) + 1:04d}.session"
        self.sessions[session] = 0
        return Answer(
            200,
            {
                "access_token": session,
                "signature": "c2lnbmF0dXJl",
                "scope": "api",
                "instance_url": f"http://{call.headers.get('host', '')}",
                "id": f"https://login.salesforce.com/id/{ORG}/005T0000000integ",
                "token_type": "Bearer",
                "issued_at": "1796457600000",
            },
        )

    def _upsert(self, key: str, fields: object) -> Answer:
        if not isinstance(fields, dict) or "Id" in fields or "External_Id__c" in fields:
            return Answer(
                400, [{"errorCode": "JSON_PARSER_ERROR", "message": "a JSON object of fields"}]
            )
        record = self._by_external_id(key)
        if record is not None:
            record.update(fields)
            if self.no_content:
                return Answer(204, committed=True)
            return Answer(200, _saved(record["Id"], created=False), committed=True)
        self.issued += 1
        record_id = f"001T0000{self.issued:010d}"
        self.accounts[record_id] = {
            "attributes": {"type": "Account", "url": API + record_id},
            "Id": record_id,
            "External_Id__c": key,
            **fields,
            "Status__c": "New",
        }
        return Answer(201, _saved(record_id, created=True), committed=True)

    def records(self) -> list[dict]:
        return list(self.accounts.values())

    def effects(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for record in self.accounts.values():
            counted[record["External_Id__c"]] = counted.get(record["External_Id__c"], 0) + 1
        return counted


def _saved(record_id: str, *, created: bool) -> dict:
    return {"id": record_id, "success": True, "errors": [], "created": created}


if __name__ == "__main__":
    serve(Salesforce(token_from_environment()))
