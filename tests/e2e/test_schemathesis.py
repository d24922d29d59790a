"""Every operation outside a project's, fuzzed signed in (`fuzz.py`)."""

from tests.e2e.fuzz import MARKS, fuzz

pytestmark = MARKS


def test_every_operation_outside_a_project_answers_within_its_schema(tmp_path):
    fuzz(tmp_path, projects=False)
