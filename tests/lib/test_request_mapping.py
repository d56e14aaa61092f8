import pytest

from lib.request_mapping import (
    MappingRefused,
    mapping_problems,
    render_request,
    requests_hash,
    schema_sample,
)

PAYLOAD = {"client_name": "Acme", "plan": "standard", "seats": 12, "tags": ["a", "b"]}
WHERE = "steps[1].request"


def test_body_template_renders_expressions_and_keeps_literals_and_types():
    mapping = {
        "body": {
            "properties": {
                "name": {"$": "client_name"},
                "slug": {"$": "join('-', [plan, client_name])"},
                "seats": {"$": "seats"},
                "tags": {"$": "tags"},
                "source": "handoff",
                "active": True,
            }
        }
    }

    rendered = render_request(mapping, PAYLOAD, where=WHERE)

    assert rendered["body"] == {
        "properties": {
            "name": "Acme",
            "slug": "standard-Acme",
            "seats": 12,
            "tags": ["a", "b"],
            "source": "handoff",
            "active": True,
        }
    }
    assert rendered["path"] == rendered["query"] == rendered["headers"] == {}


def test_without_a_body_the_payload_is_the_body():
    assert render_request({}, PAYLOAD, where=WHERE)["body"] == PAYLOAD


def test_path_query_and_headers_render_to_texts():
    mapping = {
        "path": {"account": {"$": "client_name"}},
        "query": {"seats": {"$": "seats"}, "fixed": "1"},
        "headers": {"X-Plan": {"$": "plan"}},
    }

    rendered = render_request(mapping, PAYLOAD, where=WHERE)

    assert rendered["path"] == {"account": "Acme"}
    assert rendered["query"] == {"seats": "12", "fixed": "1"}
    assert rendered["headers"] == {"X-Plan": "standard"}


def test_a_missing_field_is_refused_naming_the_place_and_the_expression():
    mapping = {"body": {"properties": {"name": {"$": "client_nam"}}}}

    with pytest.raises(MappingRefused) as refused:
        render_request(mapping, PAYLOAD, where=WHERE)

    assert str(refused.value) == "steps[1].request.body.properties.name: client_nam is missing"


def test_a_default_stands_in_for_a_missing_field():
    mapping = {"body": {"notes": {"$": "notes", "default": ""}}}

    assert render_request(mapping, PAYLOAD, where=WHERE)["body"] == {"notes": ""}


def test_a_wrong_type_is_refused_naming_the_place():
    mapping = {"body": {"slug": {"$": "join('-', [plan, seats])"}}}

    with pytest.raises(MappingRefused, match=r"^steps\[1\]\.request\.body\.slug: .*cannot be"):
        render_request(mapping, PAYLOAD, where=WHERE)


@pytest.mark.parametrize("part", ["path", "query", "headers"])
def test_an_object_where_a_text_is_needed_is_refused(part):
    mapping = {part: {"x": {"$": "tags"}}}

    with pytest.raises(MappingRefused) as refused:
        render_request(mapping, PAYLOAD, where=WHERE)

    assert str(refused.value) == f"{WHERE}.{part}.x: must render to a text or a number, not list"


def test_a_bad_expression_and_unknown_parts_are_problems_of_the_mapping():
    problems = mapping_problems(
        {"body": {"a": [{"$": "join('-', [plan"}]}, "method": "PUT"}, where=WHERE
    )

    assert (
        problems[0] == "steps[1].request: unknown parts method (known: body, path, query, headers)"
    )
    assert problems[1].startswith(
        "steps[1].request.body.a[0]: \"join('-', [plan\" is not a JMESPath"
    )
    assert mapping_problems({"headers": {"X": {"a": 1}}}, where=WHERE) == [
        "steps[1].request.headers.X: a text, a number or an expression"
    ]
    assert mapping_problems({"body": {"$": "a", "b": 1}}, where=WHERE) == [
        'steps[1].request.body: an expression object holds "$" and optionally "default", not b'
    ]


def test_the_hash_is_of_the_canonical_form():
    assert requests_hash({"a": 1, "b": [2]}) == requests_hash({"b": [2], "a": 1})
    assert requests_hash({"a": 1}) != requests_hash({"a": 2})


def test_the_sample_holds_only_required_fields():
    schema = {
        "type": "object",
        "required": ["client_name", "plan", "owner"],
        "properties": {
            "client_name": {"type": "string", "minLength": 2},
            "plan": {"type": "string", "enum": ["starter", "standard"]},
            "owner": {"type": "object", "required": ["email"], "properties": {"email": {}}},
            "notes": {"type": "string"},
        },
    }

    assert schema_sample(schema) == {
        "client_name": "xx",
        "plan": "starter",
        "owner": {"email": "x"},
    }
