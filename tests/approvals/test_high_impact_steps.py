"""A workflow step may be marked high-impact (its first failure pages, docs/incidents.md): true or false,
nothing else."""

from approvals.rules import steps_problems


def test_a_step_may_be_marked_high_impact():
    assert (
        steps_problems([{"name": "create_client"}, {"name": "charge", "high_impact": True}]) == []
    )
    assert steps_problems([{"name": "charge", "high_impact": False}]) == []


def test_a_high_impact_mark_that_is_not_a_boolean_is_refused_with_the_reason():
    assert steps_problems([{"name": "charge", "high_impact": "yes"}]) == [
        "step 1 high_impact must be true or false"
    ]
    assert steps_problems([{"name": "charge", "high_impact": 1}]) == [
        "step 1 high_impact must be true or false"
    ]
