"""Every JSON configuration file of the product is read by lib/json_config.py: the OIDC role mapping too."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings.oidc import _role_mapping


def test_a_group_named_twice_in_the_role_mapping_file_is_refused_by_json_path(
    tmp_path, monkeypatch
):
    mapping = tmp_path / "roles.json"
    mapping.write_text(
        '{"handoff-approvers": [{"workspace": 7, "role": "approver"}],\n'
        ' "handoff-approvers": [{"workspace": 7, "role": "admin"}]}'
    )
    monkeypatch.setenv("OIDC_ROLE_MAPPING_FILE", str(mapping))
    with pytest.raises(ImproperlyConfigured, match=r"handoff-approvers\"\]: the key appears twice"):
        _role_mapping()


def test_nan_in_the_role_mapping_variable_is_refused_by_json_path(monkeypatch):
    monkeypatch.delenv("OIDC_ROLE_MAPPING_FILE", raising=False)
    monkeypatch.setenv("OIDC_ROLE_MAPPING", '{"g": [{"workspace": NaN, "role": "approver"}]}')
    with pytest.raises(ImproperlyConfigured, match=r"OIDC_ROLE_MAPPING: g\[0\]\.workspace: NaN"):
        _role_mapping()


def test_a_well_formed_role_mapping_is_read(monkeypatch):
    monkeypatch.delenv("OIDC_ROLE_MAPPING_FILE", raising=False)
    monkeypatch.setenv("OIDC_ROLE_MAPPING", '{"g": [{"workspace": 7, "role": "approver"}]}')
    assert _role_mapping() == {"g": [{"workspace": 7, "role": "approver"}]}
