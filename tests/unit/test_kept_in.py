"""A JetStream acknowledgement is the message's sequence number only when the expected stream kept it (the node's
publishes carry no ``Nats-Expected-Stream``: the answer is checked instead)."""

from __future__ import annotations

import nats.js.errors
import pytest
from nats.js.api import PubAck

from actors.buckets import AUDIT_STREAM, EVENTS_STREAM
from actors.jetstream import kept_in


def test_the_expected_stream_s_acknowledgement_gives_the_sequence_number() -> None:
    assert kept_in(PubAck(stream=AUDIT_STREAM, seq=41), AUDIT_STREAM) == 41


def test_another_stream_s_acknowledgement_is_an_error_naming_both() -> None:
    with pytest.raises(nats.js.errors.Error) as refused:
        kept_in(PubAck(stream="SOMEONE_ELSES", seq=7), EVENTS_STREAM)
    assert "SOMEONE_ELSES" in str(refused.value) and EVENTS_STREAM in str(refused.value)
