"""Every operation of a project, fuzzed signed in (`fuzz.py`)."""

from tests.e2e.fuzz import MARKS, fuzz

pytestmark = MARKS


def test_every_operation_of_a_project_answers_within_its_schema(tmp_path):
    fuzz(tmp_path, projects=True)
