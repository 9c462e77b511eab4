"""The knowledge base: every category covered, every file well formed, the wrong seed claims kept out."""

from pathlib import Path

import pytest
import yaml

from cudaweb.playbooks.library import CATEGORIES, LIBRARY_DIR, PlaybookError, load, parse


def test_every_category_has_a_playbook_with_causes_checks_and_fixes():
    books = load()
    assert {b.category for b in books.values()} == set(CATEGORIES)
    for book in books.values():
        assert book.causes and book.diagnostics and book.fixes and book.symptoms, book.id
        assert all("cause" in c and "tell" in c for c in book.causes), book.id
        assert book.signatures or book.patterns, book.id


def test_oom_playbook_tells_its_seven_kinds_apart():
    causes = " ".join(c["cause"].lower() for c in load()["oom"].causes)
    for kind in ("fragmentation", "another process", "outside pytorch", "growth across steps", "dataloader",
                 "loaded twice", "real shortage"):
        assert kind in causes, kind


@pytest.mark.parametrize("claim", [
    "buddy", "find_unused_parameters defaults to true", "wsl2 cannot", "must always be set",
    "nvcc must be", "empty_cache every step", "40%", "15%",
])
def test_wrong_seed_claims_do_not_appear(claim):
    text = " ".join(p.read_text().lower() for p in Path(LIBRARY_DIR).glob("*.yaml"))
    assert claim not in text


def test_nccl_ib_disable_is_an_experiment_not_a_default():
    fixes = " ".join(load()["nccl_network"].fixes)
    assert "NCCL_IB_DISABLE=1" in fixes and "experiment" in fixes


def test_a_bad_file_fails_loudly():
    data = yaml.safe_load((Path(LIBRARY_DIR) / "oom.yaml").read_text())
    data["category"] = "not_a_category"
    with pytest.raises(PlaybookError, match="unknown category"):
        parse(data, "bad.yaml")
    data = yaml.safe_load((Path(LIBRARY_DIR) / "oom.yaml").read_text())
    data["match"]["patterns"] = [{"regex": "([unclosed", "weight": 1}]
    with pytest.raises(PlaybookError, match="bad pattern"):
        parse(data, "bad.yaml")


def test_every_finding_of_the_real_fault_campaign_has_a_playbook():
    import json

    real = Path(__file__).resolve().parents[1] / "fixtures" / "real"
    known = {signature for book in load().values() for signature in book.signatures}
    named = set()
    for path in sorted(real.glob("faults/*.json")) + sorted(real.glob("burnin/faults/*.json")):  # burn-in: issue 20
        if path.name.endswith(".record.json"):
            continue
        for check in json.loads(path.read_text())["checks"]:
            if check["status"] in ("fail", "error", "warn"):
                named.update(check["signatures"])
    assert named and named - known == set()
