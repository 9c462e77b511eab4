"""Text that leaves is clean: a summary a node wrote (a terminal colour, a carriage return and a second line dressed
as our own message, a Slack mention, bidirectional and C1 controls) reaches the Slurm drain reason, the Kubernetes
condition, events and annotation, and the webhooks as one line with no control character, under each channel's
rules."""

import unicodedata
from datetime import datetime, timezone

from cudaweb.hooks import kubernetes, outbound, payloads, slurm

FAKE_LINE = "\r\n*gpu-a05* is ready (was rma): marked healthy by an operator"
HOSTILE = ("\x1b[31mGPU 1 fell off the bus\x1b[0m" + FAKE_LINE +
           " <!channel> _now_ `rm -rf` ~x~ \x07\x7f\x85\x9b2J\u202eevil")
NOW = datetime(2026, 12, 5, 8, 0, tzinfo=timezone.utc)
NODE = {"metadata": {"name": "h200-node-7", "uid": "u", "resourceVersion": "41"}, "spec": {}, "status": {}}


def assert_clean(text):
    """One line a reader sees whole: no control, format or surrogate character, no remnant of the colour codes."""
    assert not [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs")], ascii(text)
    assert "[31m" not in text and "[0m" not in text and "2J" not in text, text


def test_one_line_keeps_the_words_and_drops_the_controls():
    assert outbound.line(HOSTILE) == ("GPU 1 fell off the bus *gpu-a05* is ready (was rma): marked healthy by an "
                                      "operator <!channel> _now_ `rm -rf` ~x~ evil")
    assert outbound.line("a\u2028b\x1c c\t\td") == "a b c d"  # what Python and Unicode call line breaks: spaces
    assert outbound.line("\x1b]0;title\x07x") == "x" and outbound.line(None) == ""
    assert outbound.line("x" * 50, cap=10) == "x" * 10


def test_the_slurm_drain_reason_is_printable_ascii_on_one_line():
    argv = slurm.drain_argv("gpu-fake-01", HOSTILE + ' "quoted" température')
    reason = argv[3]
    assert reason.startswith("Reason=cudaweb: GPU 1 fell off the bus *gpu-a05* is ready")
    assert all(" " <= c <= "~" for c in reason) and '"' not in reason and "temp?rature" in reason
    assert_clean(reason)
    assert len(slurm.drain_argv("n", "x" * 500)[3]) == len("Reason=") + slurm.REASON_CAP


def test_kubernetes_messages_and_the_annotation_are_one_clean_line():
    condition = kubernetes.health_condition(NODE, status="False", reason="gpu_fallen_off_bus", message=HOSTILE,
                                            now=NOW)
    event = kubernetes.gpu_event(NODE, key="k", now=NOW, gpu={
        "index": 1, "uuid": "GPU-\x1b[31mx", "healthy": False, "reason": "gpu_fallen_off_bus", "message": HOSTILE})
    annotations = kubernetes.cordon_patch(NODE, HOSTILE)[3]["value"]
    for text in (condition["message"], event["message"], annotations[kubernetes.REASON]):
        assert_clean(text)
        assert "GPU 1 fell off the bus *gpu-a05* is ready (was rma)" in text  # the words stay
    assert event["message"].startswith("GPU 1 (GPU-x): GPU 1 fell off the bus")
    assert len(kubernetes.cordon_patch(NODE, "x" * 5000)[3]["value"][kubernetes.REASON]) == kubernetes.ANNOTATION_CAP


def _slack_texts(message):
    attachment = message["attachments"][0]
    return [message["text"], attachment["fallback"], attachment["title"]] + [f["value"] for f in attachment["fields"]]


def test_a_loop_webhook_posts_one_line_that_adds_no_formatting():
    """A summary once printed a second bold line in Slack: "*gpu-a05* is ready (was rma): marked healthy by an
    operator", as if the loop had said it."""
    message = payloads.loop_message(event="health_event", node_name="gpu-a05", headline="has a new xid event",
                                    cause=HOSTILE, url="https://cudaweb.example.org/nodes/1/")
    assert message["text"].startswith("*gpu-a05* has a new xid event: GPU 1 fell off the bus ")  # our bold name
    assert message["text"].endswith(" <https://cudaweb.example.org/nodes/1/|node>")  # our link
    for text in _slack_texts(message):
        assert_clean(text)
        assert "*gpu-a05* is ready" not in text and "<!channel>" not in text and "_now_" not in text
        assert "`" not in text and "~x~" not in text
    assert "&lt;!channel&gt;" in message["text"]
    data = message["loop"]
    assert_clean(data["cause"])
    assert "*gpu-a05* is ready" in data["cause"] and "&lt;!channel&gt;" in data["cause"]  # data: no look-alikes


def test_slack_markup_inside_a_word_formats_nothing_and_stays():
    assert outbound.slack_mrkdwn("L1 driver.gpu_health [gpu_hardware]: a*b") == \
        "L1 driver.gpu_health [gpu_hardware]: a*b"
    assert outbound.slack_mrkdwn("*bold* _it_ ~s~ `c`") == "\u2217bold\u2217 \u02cdit\u02cd \u223cs\u223c \u02cbc\u02cb"
