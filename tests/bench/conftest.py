import pytest


@pytest.fixture(autouse=True)
def idle_file(tmp_path, monkeypatch):
    """The idle references of bench/pairs.py in the test's own file, never the bench's."""
    path = tmp_path / "idle_references.json"
    monkeypatch.setenv("BENCH_IDLE_REFERENCES", str(path))
    return path
