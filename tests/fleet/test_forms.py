"""The add-node form (the onboarding wizard's first step) asks for the node's Python instead of guessing python3."""

import pytest
from django.urls import reverse

from cudaweb.fleet.forms import NodeForm

pytestmark = pytest.mark.django_db


def test_the_wizard_asks_for_the_python_that_has_torch_with_no_default():
    field = NodeForm().fields["python_path"]
    assert field.required and not field.initial  # a node's python3 is most often the system's, without torch
    form = NodeForm({"name": "gpu-1", "address": "10.0.0.5", "port": 22, "username": "ops",
                     "private_key": "", "key_path": "", "labels": ""})
    assert not form.is_valid() and "python_path" in form.errors


def test_the_add_node_page_shows_no_python3_default_and_says_how_to_find_the_interpreter(operator_client):
    page = operator_client.get(reverse("fleet:node_add")).content.decode()
    field = page[page.index('name="python_path"') - 200:page.index('name="python_path"') + 400]
    assert 'value="python3"' not in field and "placeholder=" in field
    assert "import torch" in page
