"""A request whose Content-Length is no ASCII number is a 400 before Django reads it, never a 500
(cudaweb/malformed.py): "\u00b2" passes str.isdigit() and fails int()."""

import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("length", ["\u00b2", "\u0663", "1" * 30, "abc"])
def test_a_content_length_no_int_reads_is_refused_with_400(client, length):
    answer = client.post("/api/v1/triage/", data="{}", content_type="application/json", CONTENT_LENGTH=length)
    assert answer.status_code == 400
