"""NCCL's own reading of its settings (NVIDIA/nccl src/misc/param.cc, src/graph/paths.cc), as advice.environment
applies it to the environment and to NCCL's conf files."""

import pytest

from agents.cudaprobe.checks.advice import advice_environment, c_integer, level_of, nccl_settings
from agents.cudaprobe.engine import Context


@pytest.mark.parametrize("text, value", [
    ("1", 1), (" 1", 1), ("\t1", 1), ("1 ", 1), ("0x1", 1), ("  0x10", 16), ("010", 8), ("08", 0), ("1abc", 1),
    ("+1", 1), ("-1", -1), ("true", 0), ("TRUE", 0), ("yes", 0), ("", 0),
])
def test_integers_are_read_like_strtoll_base_0(text, value):
    assert c_integer(text) == value


@pytest.mark.parametrize("text, level", [
    ("LOC", "LOC"), ("NVL", "NVL"), ("PIX", "PIX"), ("SYS", "SYS"), ("0", "LOC"), ("1", "PIX"), ("3", "PHB"),
    ("4", "SYS"), ("9", "SYS"), ("nvl", None), ("NVL ", None), (" 1", None), ("-1", None),
])
def test_levels_are_exact_names_or_old_numbers(text, level):
    assert level_of(text) == level


def _ctx(tmp_path, environ, user_conf=None, system_conf=None):
    environ = dict(environ, HOME=str(tmp_path))
    if user_conf is not None:
        (tmp_path / ".nccl.conf").write_text(user_conf)
    system = tmp_path / "etc-nccl.conf"
    if system_conf is not None:
        system.write_text(system_conf)
    environ["CUDAPROBE_NCCL_SYSTEM_CONF"] = str(system)
    return Context("quick", environ=environ)


@pytest.mark.parametrize("value, disabled", [("1", True), ("0x1", True), (" 1", True), ("2", False),
                                             ("true", False), ("0", False)])
def test_p2p_disable_takes_exactly_one(tmp_path, value, disabled):
    (setting,) = nccl_settings(_ctx(tmp_path, {"NCCL_P2P_DISABLE": value}))
    assert bool(setting["effect"]) is disabled


def test_ib_disable_takes_any_non_zero(tmp_path):
    (setting,) = nccl_settings(_ctx(tmp_path, {"NCCL_IB_DISABLE": "2"}))
    assert setting["effect"]


def test_a_word_where_nccl_wants_a_number_is_named_as_such(tmp_path):
    outcome = advice_environment(_ctx(tmp_path, {"NCCL_SHM_DISABLE": "true"}))
    assert outcome.status == "warn" and outcome.signatures == ["advice_env_misspelled"]
    assert "NCCL reads 'true' as 0" in outcome.evidence


def test_the_environment_beats_the_user_file_which_beats_the_system_file(tmp_path):
    ctx = _ctx(tmp_path, {"NCCL_ALGO": "Ring"}, user_conf="NCCL_ALGO=Tree\nNCCL_PROTO=Simple\n",
               system_conf="NCCL_PROTO=LL\nNCCL_MAX_NCHANNELS=1\n# NCCL_P2P_DISABLE=1\n")
    found = {s["name"]: (s["value"], s["source"]) for s in nccl_settings(ctx)}
    assert found == {"NCCL_ALGO": ("Ring", "environment"),
                     "NCCL_PROTO": ("Simple", str(tmp_path / ".nccl.conf")),
                     "NCCL_MAX_NCHANNELS": ("1", str(tmp_path / "etc-nccl.conf"))}


def test_nccl_conf_file_replaces_the_user_file(tmp_path):
    other = tmp_path / "site.conf"
    other.write_text("NCCL_P2P_LEVEL=LOC\n")
    ctx = _ctx(tmp_path, {"NCCL_CONF_FILE": str(other)}, user_conf="NCCL_P2P_LEVEL=SYS\n")
    (setting,) = nccl_settings(ctx)
    assert setting["value"] == "LOC" and setting["source"] == str(other) and "LOC" in setting["effect"]


def test_a_channel_limit_in_a_conf_file_warns(tmp_path):
    outcome = advice_environment(_ctx(tmp_path, {}, system_conf="NCCL_MAX_NCHANNELS=1\n"))
    assert outcome.status == "warn" and "NCCL_MAX_NCHANNELS=1 (from" in outcome.evidence


def test_multicast_turned_off_on_purpose_is_named_not_warned(tmp_path):
    outcome = advice_environment(_ctx(tmp_path, {"NCCL_NVLS_ENABLE": "0"}))
    assert outcome.status == "pass" and "NCCL_NVLS_ENABLE=0" in outcome.summary


def test_nothing_set_passes(tmp_path):
    assert advice_environment(_ctx(tmp_path, {})).status == "pass"
