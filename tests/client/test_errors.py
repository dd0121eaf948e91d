"""Typed errors built from wire codes, including codes this client does not know."""

from odradek.client.errors import ErrorCode, OdradekError, error_for_code, error_name

UNKNOWN_CODE = 9999  # not in ErrorCode: what a newer node could send (protobuf keeps unknown enum values as ints)


def test_known_code_is_named() -> None:
    assert error_name(ErrorCode.NOT_CONTROLLER) == "NOT_CONTROLLER"
    assert str(error_for_code(ErrorCode.NOT_CONTROLLER)) == "NOT_CONTROLLER"


def test_unknown_code_builds_an_error_named_by_its_number() -> None:
    error = error_for_code(UNKNOWN_CODE)
    assert type(error) is OdradekError
    assert error.code == UNKNOWN_CODE
    assert error.code_name == str(UNKNOWN_CODE)
    assert str(error) == str(UNKNOWN_CODE)
    assert not error.retriable
