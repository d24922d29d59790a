from runners.tests.providers.conftest import make_model  # noqa: F401  (a fixture)
from tests.fake_providers import openai_server  # noqa: F401  (a fixture)
