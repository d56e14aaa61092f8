"""A Salesforce-style CRM for the tests: a create is an upsert by an external id in the path, written from
Salesforce's REST API docs (https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/
dome_upsert.htm, …/resources_sobject_upsert.htm, …/dome_delete_record.htm, …/errorcodes.htm):

    PATCH  /services/data/v60.0/sobjects/Account/External_Id__c/K   a JSON object of Account fields
        -> 201 {"id": "001…", "success": true, "errors": [], "created": true}   (no record had K)
        -> 200 {"id": "001…", "success": true, "errors": [], "created": false}  (the record with K updated)
    GET    /services/data/v60.0/sobjects/Account/External_Id__c/K
        -> 200 {"attributes": {"type": "Account", "url": …}, "Id": …, "External_Id__c": K, …fields,
                "Status__c": "New"}, or 404 [{"errorCode": "NOT_FOUND", "message": …}]
    DELETE /services/data/v60.0/sobjects/Account/<Id>   -> 204, or 404 [{"errorCode": "NOT_FOUND", …}]

`Status__c` is the record's own status field (switch `status`: {key: value}). Faults: `no_content`: true
answers an update 204 without a body, as API versions before 46.0 did. An effect is a live Account record;
they are counted per external id (a deleted record is not counted).
"""

from tests.providers.harness import Answer, Call, Provider, serve, token_from_environment

API = "/services/data/v60.0/sobjects/Account/"
BY_EXTERNAL_ID = API + "External_Id__c/"
NOT_FOUND = [{"errorCode": "NOT_FOUND", "message": "The requested resource does not exist"}]


class Salesforce(Provider):
    def __init__(self, token: str | None):
        super().__init__(token)
        self.accounts: dict[str, dict] = {}  # by Id
        self.issued = 0
        self.no_content = False

    def unauthorized(self) -> Answer:
        return Answer(
            401, [{"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}]
        )

    def set_faults(self, faults: dict) -> None:
        self.no_content = faults.get("no_content", self.no_content)
        for key, status in faults.get("status", {}).items():
            if record := self._by_external_id(key):
                record["Status__c"] = status

    def _by_external_id(self, key: str) -> dict | None:
        return next((r for r in self.accounts.values() if r["External_Id__c"] == key), None)

    def route(self, call: Call) -> Answer:
        if call.path.startswith(BY_EXTERNAL_ID):
            key = call.path[len(BY_EXTERNAL_ID) :]
            if call.method == "PATCH":
                return self._upsert(key, call.body)
            if call.method == "GET":
                record = self._by_external_id(key)
                return Answer(200, record) if record else Answer(404, NOT_FOUND)
        elif call.path.startswith(API) and call.method == "DELETE":
            if self.accounts.pop(call.path[len(API) :], None) is None:
                return Answer(404, NOT_FOUND)
            return Answer(204, committed=True)
        return Answer(
            404, [{"errorCode": "NOT_FOUND", "message": "The requested resource does not exist"}]
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
