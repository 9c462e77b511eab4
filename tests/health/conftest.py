import pytest

from cudaweb.health.models import LoopPolicy
from cudaweb.nodes.models import Node


@pytest.fixture
def loop_settings(settings):
    settings.CUDAWEB_LOOP_MODE = "act"
    settings.CUDAWEB_SLURM_CONTROLLER = "slurm-ctl"
    settings.CUDAWEB_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    settings.CUDAWEB_K8S_API = ""
    return settings


def make_node(name, labels=("rack-a",), **fields):
    return Node.objects.create(name=name, address="10.0.0.%d" % (hash(name) % 250 + 1), username="ops",
                               labels=list(labels), status=Node.Status.READY, **fields)


@pytest.fixture
def act_policy(db):
    return LoopPolicy.objects.create(label="rack-a", mode="act", ladder=["reset"], auto=True)
