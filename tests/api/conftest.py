import pytest

from cudaweb.api.services import token_issue
from tests.conftest import user_with_role


@pytest.fixture
def token_for(django_user_model):
    """token_for(role) -> a Bearer token of a new user with that role (None: a user in no role group)."""
    made = []

    def make(role, username=None):
        user = user_with_role(django_user_model, username or "api-%s-%d" % (role or "none", len(made)), role)
        made.append(user)
        return token_issue(user=user, name="test")[1]
    return make


def bearer(token):
    return {"HTTP_AUTHORIZATION": "Bearer %s" % token}
