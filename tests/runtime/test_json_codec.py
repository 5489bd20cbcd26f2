"""The JSON codec: arrays as raw buffer frames with dtype and shape, and what it refuses."""
import json

import numpy as np
import pytest

from actors.runtime.protocol import json_codec
from actors.runtime.errors import ProtocolError

pytestmark = pytest.mark.timeout(30)


def _roundtrip(payload):
    body, buffers = json_codec.dumps(payload)
    received = [bytearray(memoryview(b).cast("B")) for b in buffers]  # as off the wire
    return json_codec.loads(body, received), body, received


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.arange(5, dtype=">i8"),
    np.array(3.5),
    np.zeros((0, 3), dtype=np.uint8),
    np.array([True, False]),
    np.arange(6, dtype=np.complex64),
], ids=["f4-matrix", "big-endian-i8", "0-d", "empty", "bool", "complex"])
def test_arrays_keep_dtype_shape_and_values(array):
    decoded, body, _ = _roundtrip({"x": array})
    assert json.loads(body)["x"] == {"$array": 0, "dtype": array.dtype.str,
                                     "shape": list(array.shape)}
    assert decoded["x"].dtype == array.dtype and decoded["x"].shape == array.shape
    np.testing.assert_array_equal(decoded["x"], array)


def test_a_received_array_lies_on_its_frame_without_a_copy():
    decoded, _, received = _roundtrip([np.arange(1000, dtype=np.float64)])
    assert np.shares_memory(decoded[0], np.frombuffer(received[0], dtype=np.uint8))


def test_an_array_is_sent_from_its_own_memory_when_contiguous():
    array = np.arange(1000, dtype=np.float32)
    _, buffers = json_codec.dumps(array)
    assert np.shares_memory(np.frombuffer(buffers[0], dtype=np.uint8), array)


def test_a_strided_view_travels_as_its_values_in_c_order():
    view = np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2].T
    decoded, _, _ = _roundtrip(view)
    np.testing.assert_array_equal(decoded, view)


def test_numpy_scalars_and_bytes_become_json_numbers_and_buffer_frames():
    decoded, body, _ = _roundtrip({"n": np.float32(1.5), "i": np.int64(7), "b": b"\x00\x01"})
    assert decoded == {"n": 1.5, "i": 7, "b": b"\x00\x01"}
    assert b'"n":1.5' in body and b'"i":7' in body


def test_values_json_cannot_hold_are_a_type_error_naming_them():
    with pytest.raises(TypeError, match="cannot travel as raw bytes"):
        json_codec.dumps(np.array([object()]))
    with pytest.raises(TypeError, match="cannot encode as JSON.*set"):
        json_codec.dumps({"s": {1, 2}})


def _marker(**fields):
    return json.dumps({"$array": 0, "dtype": "<f4", "shape": [2], **fields}).encode()


@pytest.mark.parametrize("body, frames, message", [
    (_marker(), [b"\x00" * 7], "has 7 bytes; dtype <f4 with shape \\[2\\] needs 8"),
    (_marker(shape=[3]), [b"\x00" * 8], "needs 12"),
    (_marker(), [], "missing buffer frame 0"),
    (_marker(dtype="|O"), [b"\x00" * 16], "not a numpy dtype string of plain data"),
    (_marker(dtype="no-such-type"), [b"\x00" * 8], "not a numpy dtype string"),
    (_marker(dtype=4), [b"\x00" * 8], "not a numpy dtype string"),
    (_marker(shape=[-1]), [b"\x00" * 8], "non-negative integers"),
    (_marker(shape=[2.0]), [b"\x00" * 8], "non-negative integers"),
    (_marker(shape="2"), [b"\x00" * 8], "non-negative integers"),
    (b'{"$array": "0", "dtype": "<f4", "shape": [2]}', [b"\x00" * 8], "missing buffer frame"),
    (b'{"x": [1, 2', [], "undecodable JSON"),
    (b"\xff\xfe", [], "undecodable JSON"),
], ids=["short-frame", "shape-too-big", "no-frame", "object-dtype", "unknown-dtype",
        "dtype-not-str", "negative-dim", "float-dim", "shape-not-list", "index-not-int",
        "truncated-json", "not-utf8"])
def test_a_malformed_array_or_body_is_a_protocol_error_saying_what_is_wrong(body, frames,
                                                                             message):
    with pytest.raises(ProtocolError, match=message):
        json_codec.loads(body, frames)


def test_frames_are_released_when_dropped_without_waiting_for_the_garbage_collector():
    import gc
    import weakref

    class Frame(bytearray):  # weak-referenceable, as a received frame is
        pass

    array = np.ones(1000)
    sent, received = weakref.ref(array), Frame(array.tobytes())
    gone = weakref.ref(received)
    gc.disable()
    try:
        body, buffers = json_codec.dumps({"x": [array]})
        decoded = json_codec.loads(body, [received])
        del array, buffers, received, decoded
        assert sent() is None and gone() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("dtype, shape, frame, message", [
    ("i4,,f8", [1], b"\x00" * 12, "dtype 'i4,,f8' is not a numpy dtype string"),
    ("(3,)V0", [1], b"", "dtype '\\(3,\\)V0' is not a numpy dtype string"),
    ("(2,)f4", [1], b"\x00" * 8, "only a byte order, a type name"),
    ("V0", [], b"", "its item size is zero"),
    ("S", [0], b"", "its item size is zero"),
    ("object", [1], b"\x00" * 8, "it holds Python objects"),
    ([["a", "<f4"]], [1], b"\x00" * 4, "not a string"),
    ("<f4", [1] * 33, b"\x00" * 4, "33 dimensions, at most 32"),
    ("<f4", [2 ** 40] * 3, b"", "larger than numpy can address"),
    ("<f4", [0, 2 ** 70], b"", "larger than numpy can address"),
    ("<f4", [0, 2 ** 62, 4], b"", "larger than numpy can address"),
    ("<f4", [True, 1], b"\x00" * 4, "non-negative integers"),
], ids=["comma-dtype", "zero-size-subarray", "subarray", "zero-size-void", "zero-size-bytes",
        "object-name", "structured-list", "33-dims", "product-overflows", "empty-but-huge",
        "empty-but-too-big", "bool-dim"])
def test_an_array_marker_numpy_would_choke_on_is_refused_before_numpy_sees_it(dtype, shape,
                                                                             frame, message):
    body = json.dumps({"$array": 0, "dtype": dtype, "shape": shape}).encode()
    with pytest.raises(ProtocolError, match=message):
        json_codec.loads(body, [frame])


def test_plain_dtypes_by_name_and_with_a_unit_still_decode():
    for name, array in [("float32", np.ones(2, np.float32)), ("?", np.ones(2, bool)),
                        ("<M8[ns]", np.zeros(2, "<M8[ns]")), ("|V4", np.zeros(2, "V4"))]:
        body = json.dumps({"$array": 0, "dtype": name, "shape": [2]}).encode()
        np.testing.assert_array_equal(json_codec.loads(body, [array.tobytes()]), array)


def _nested(depth, opener=b"[", closer=b"]"):
    return opener * depth + closer * depth


def test_a_document_nested_to_the_limit_decodes_and_one_level_more_is_refused():
    assert json_codec.loads(_nested(100)) == json.loads(_nested(100))
    with pytest.raises(ProtocolError, match="more than 100 levels deep"):
        json_codec.loads(_nested(101))
    with pytest.raises(ProtocolError, match="more than 100 levels deep"):
        json_codec.loads(b'{"a":' * 101 + b"1" + b"}" * 101)


def test_nesting_far_beyond_the_recursion_limit_is_refused_without_recursing():
    with pytest.raises(ProtocolError, match="more than 100 levels deep"):
        json_codec.loads(_nested(1_000_000))
    with pytest.raises(ProtocolError, match="more than 100 levels deep"):
        json_codec.loads(b"[" * 3_000_000)  # cut short: refused before the parser fails


@pytest.mark.parametrize("body", [
    b'["' + b"[" * 1000 + b'"]',
    b'["\\"' + b"{" * 1000 + b'"]',
    b'["\\\\\\"[[[", ' + _nested(99) + b"]",
], ids=["brackets-in-a-string", "after-an-escaped-quote", "after-escaped-backslashes"])
def test_brackets_inside_strings_do_not_count_towards_the_nesting(body):
    assert json_codec.loads(body) == json.loads(body)


def test_the_nesting_scan_carries_strings_and_depth_from_one_chunk_to_the_next():
    def body(inner):  # 60 levels, a string longer than a scan chunk (1 MiB), `inner` deeper
        return b"[" * 60 + b'"' + b"{" * (2 << 20) + b'",' + _nested(inner) + b"]" * 60

    assert json_codec.loads(body(40)) == json.loads(body(40))
    with pytest.raises(ProtocolError, match="more than 100 levels deep"):
        json_codec.loads(body(41))


def test_an_escaped_backslash_ends_no_string_early_nor_late():
    body = b'["\\\\", ' + _nested(100) + b"]"  # the string is one backslash: 101 levels
    with pytest.raises(ProtocolError, match="more than 100 levels deep"):
        json_codec.loads(body)


def test_an_error_quotes_at_most_a_bounded_part_of_huge_input():
    huge = "x" * 1_000_000
    for marker, frames in [({"$array": 0, "dtype": huge, "shape": [1]}, [b"\x00"]),
                           ({"$array": 0, "dtype": "<f4", "shape": [-1] * 32}, [b""]),
                           ({"$array": huge, "dtype": "<f4", "shape": [1]}, [b""]),
                           ({"$buf": huge}, [])]:
        with pytest.raises(ProtocolError) as raised:
            json_codec.loads(json.dumps(marker).encode(), frames)
        assert len(str(raised.value)) < 1000
    assert "(1000000 characters)" in str(raised.value)
