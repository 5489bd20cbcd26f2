"""The wire format: header layout, payload codecs and zero-copy buffers."""
import json
import pickle
import struct

import numpy as np
import pytest

from actors.runtime.protocol import envelope, json_codec, remote_errors, serialization
from actors.runtime.errors import ProtocolError, RemoteError
from actors.runtime.protocol import (HEADER_SIZE, PROTOCOL_VERSION, Flag, Kind, pack_header,
                                     unpack_header)

pytestmark = pytest.mark.timeout(30)


def test_header_is_sixteen_little_endian_bytes_in_the_documented_order():
    header = pack_header(Kind.STORE_GET, 0x0102030405060708, Flag.JSON, 3)
    assert len(header) == HEADER_SIZE == 16
    assert struct.unpack("<2sBBHHQ", header) == (b"AG", PROTOCOL_VERSION, 0x08, 0x0101, 3,
                                                 0x0102030405060708)
    assert unpack_header(header) == (PROTOCOL_VERSION, 0x08, 0x0101, 3, 0x0102030405060708)


@pytest.mark.parametrize("frame, words", [
    (b"", "truncated"), (b"AG\x01", "truncated"), (b"A" * 17, "oversized"),
    (b"XX" + b"\0" * 14, "magic"),
])
def test_a_bad_header_is_a_protocol_error_that_says_what_is_wrong(frame, words):
    with pytest.raises(ProtocolError, match=words):
        unpack_header(frame)


def test_a_header_of_another_protocol_version_is_refused_by_name():
    frame = struct.pack("<2sBBHHQ", b"AG", PROTOCOL_VERSION + 1, 0, Kind.PING, 0, 7)
    with pytest.raises(ProtocolError, match="version 2 not supported"):
        envelope.read_header([frame, b""])


def test_a_frame_count_that_disagrees_with_the_header_is_malformed():
    frames = envelope.encode(Kind.PING, 1, np.zeros(1000))
    with pytest.raises(ProtocolError, match="announces 1 buffer"):
        envelope.read_header(frames[:-1])


def test_each_numpy_buffer_travels_as_its_own_frame_outside_the_pickle():
    a, b = np.arange(1000, dtype=np.float32), np.ones((20, 30))
    frames = envelope.encode(Kind.PING, 1, {"a": a, "b": b, "n": 3})
    assert len(frames) == 4
    assert unpack_header(bytes(frames[0])).nbufs == 2
    assert len(frames[1]) < 500  # the arrays are not inside the body
    assert bytes(frames[2]) == a.tobytes() and bytes(frames[3]) == b.tobytes()


@pytest.mark.parametrize("payload", [None, "x" * 5000, {"a": np.ones((20, 30)), "n": 3},
                                     [np.arange(1000, dtype=np.float32), np.zeros((4, 5, 6))]])
def test_a_message_counts_the_bytes_of_all_its_frames(payload):
    frames = envelope.encode(Kind.PING, 1, payload)
    assert envelope.message_bytes(frames) == sum(len(bytes(frame)) for frame in frames)


def test_small_arrays_stay_inside_the_body_and_arrive_writable():
    small = np.arange(serialization.INBAND_LIMIT // 8 - 1, dtype=np.float64)
    body, buffers = serialization.dumps({"small": small})
    assert buffers == []
    received = serialization.loads(body)["small"]
    np.testing.assert_array_equal(received, small)
    assert received.flags.writeable


def test_arrays_are_rebuilt_on_top_of_the_received_frames_without_a_copy():
    received = bytearray(np.arange(1000, dtype=np.float64).tobytes())
    body, buffers = serialization.dumps(np.arange(1000, dtype=np.float64))
    assert len(buffers) == 1
    array = serialization.loads(body, [memoryview(received)])
    assert np.shares_memory(array, np.frombuffer(received, dtype=np.float64))
    np.testing.assert_array_equal(array, np.arange(1000))


def test_functions_defined_at_run_time_travel_by_value():
    offset = 5
    body, buffers = serialization.dumps(lambda x: x + offset)
    assert serialization.loads(body, buffers)(1) == 6


def test_the_json_codec_carries_bytes_as_buffer_frames():
    frames = envelope.encode(Kind.STORE_SET, 9, {"key": "k", "value": b"\x00\xff"}, Flag.JSON)
    assert frames[1] == b'{"key":"k","value":{"$buf":0}}'
    assert frames[2] == b"\x00\xff"
    header = envelope.read_header(frames)
    assert envelope.read_payload(header, frames) == {"key": "k", "value": b"\x00\xff"}


def test_a_payload_encoded_once_is_sent_to_many_with_only_the_header_differing():
    value = {"a": b"\x01", "b": np.arange(100_000.0)}  # an in-band and an out-of-band part
    shared = envelope.Encoded(value)
    for flags in (Flag.RESPONSE, Flag.RESPONSE | Flag.JSON):
        replies = [envelope.encode(Kind.STORE_QUORUM, req_id, shared, flags) for req_id in (1, 2)]
        assert replies[0][1] is replies[1][1]  # one body, encoded once
        assert [envelope.read_header(r).req_id for r in replies] == [1, 2]
        for frames in replies:
            got = envelope.read_payload(envelope.read_header(frames), frames)
            assert got["a"] == b"\x01"
            np.testing.assert_array_equal(got["b"], value["b"])


@pytest.mark.parametrize("value", [{"$buf": 0}, {"$array": 1, "note": "x"}])
def test_a_map_that_would_read_as_a_buffer_marker_is_refused_before_it_is_sent(value):
    with pytest.raises(TypeError, match="buffer marker"):
        json_codec.dumps({"v": value})
    assert json_codec.loads(*json_codec.dumps({"$buf": 0, "other": 1})) == {"$buf": 0,
                                                                          "other": 1}


def test_a_json_body_that_refers_to_a_missing_frame_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="missing buffer frame 3"):
        json_codec.loads(b'{"v":{"$buf":3}}', [])


def test_an_undecodable_body_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="undecodable pickle"):
        serialization.loads(b"\x80\x05garbage")
    with pytest.raises(ProtocolError, match="undecodable JSON"):
        json_codec.loads(b"{not json")


@pytest.mark.parametrize("flags", [0, Flag.JSON], ids=["pickle", "json"])
def test_read_payload_turns_whatever_fails_while_decoding_into_a_protocol_error(flags):
    header = unpack_header(pack_header(Kind.PING, 1, flags, 0))
    with pytest.raises(ProtocolError, match="undecodable .* body: TypeError"):
        envelope.read_payload(header, [b"", object()])


def _raised(exc, cause=None):
    try:
        raise exc from cause
    except Exception as caught:  # noqa: BLE001 - returned with its traceback
        return caught


def test_an_error_payload_is_bounded_whatever_the_exception_holds():
    exc = _raised(ValueError("x" * 10_000_000))
    described = remote_errors.error_payload(exc, include_object=False)
    assert len(json.dumps(described)) < 64 * 1024
    assert described["message"].endswith("(10000000 characters)")
    rebuilt = remote_errors.exception_from_payload(described)
    assert type(rebuilt) is ValueError and str(rebuilt).endswith("(10000000 characters)")
    pickled = remote_errors.error_payload(exc, include_object=True)
    assert "exception" not in pickled and len(pickle.dumps(pickled)) < 64 * 1024
    rebuilt = remote_errors.exception_from_payload(pickled)
    assert isinstance(rebuilt, RemoteError) and rebuilt.remote_type == "builtins.ValueError"


def test_an_error_payload_keeps_the_end_of_a_long_traceback():
    exc = None
    for level in range(300):  # a chain of causes, each formatted in full
        exc = _raised(LookupError(f"level {level}"), cause=exc)
    traceback = remote_errors.error_payload(exc, include_object=False)["traceback"]
    assert len(traceback) < remote_errors.TRACEBACK_LIMIT + 100
    assert traceback.endswith("LookupError: level 299\n") and "level 0\n" not in traceback


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no text")


def test_an_error_payload_describes_an_exception_whose_message_cannot_be_made():
    described = remote_errors.error_payload(_raised(_Unprintable()), include_object=False)
    assert described["type"].endswith("_Unprintable") and "cannot be shown" in described["message"]


def test_an_error_payload_rebuilds_the_original_exception_with_the_remote_traceback():
    try:
        raise KeyError("missing thing")
    except KeyError as exc:
        payload = remote_errors.error_payload(exc, include_object=True)
    rebuilt = remote_errors.exception_from_payload(payload)
    assert isinstance(rebuilt, KeyError) and "missing thing" in str(rebuilt)
    assert "raise KeyError" in rebuilt.remote_traceback


class _Unlisted(Exception):
    pass


def test_a_json_error_payload_rebuilds_only_allowed_types_and_names_the_others():
    builtin = remote_errors.exception_from_payload(
        remote_errors.error_payload(ValueError("bad"), include_object=False))
    assert type(builtin) is ValueError and str(builtin) == "bad"
    unlisted = remote_errors.exception_from_payload(
        remote_errors.error_payload(_Unlisted("odd"), include_object=False))
    assert isinstance(unlisted, RemoteError)
    assert unlisted.remote_type.endswith("_Unlisted") and "odd" in str(unlisted)


def test_a_json_error_payload_naming_an_unlisted_type_never_builds_it():
    payload = {"type": "subprocess.Popen", "message": "x", "args": [["true"]]}
    rebuilt = remote_errors.exception_from_payload(payload)
    assert isinstance(rebuilt, RemoteError) and rebuilt.remote_type == "subprocess.Popen"
