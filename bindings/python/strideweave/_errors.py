"""Exceptions: every error of the C library, and every argument check made
here first, raises a built-in exception kind that is also a `strideweave.Error`
carrying the stable error `code`."""
from enum import IntEnum


class ErrorCode(IntEnum):
    """The C ABI's pinned error codes (sw_error_code_t)."""

    OK = 0
    TYPE = 1
    VALUE = 2
    STATE = 3
    UNSUPPORTED = 4
    INDEX = 5
    OUT_OF_MEMORY = 6
    IO = 7
    DATA_CORRUPT = 8
    DEVICE_LOST = 9
    STALE_HANDLE = 10
    TIMEOUT = 11
    CANCELLED = 12
    INTERNAL = 13


class Error(Exception):
    """Base of every StrideWeave exception; `code` is an ErrorCode."""

    code = ErrorCode.INTERNAL


class StrideWeaveTypeError(Error, TypeError):
    code = ErrorCode.TYPE


class StrideWeaveValueError(Error, ValueError):
    code = ErrorCode.VALUE


class StrideWeaveRuntimeError(Error, RuntimeError):
    """Released, pending, owned, pinned, conflicting or modified in-place."""

    code = ErrorCode.STATE


class StrideWeaveNotImplementedError(Error, NotImplementedError):
    code = ErrorCode.UNSUPPORTED


class StrideWeaveIndexError(Error, IndexError):
    code = ErrorCode.INDEX


class StrideWeaveMemoryError(Error, MemoryError):
    code = ErrorCode.OUT_OF_MEMORY


class StrideWeaveOSError(Error, OSError):
    code = ErrorCode.IO


class DataCorruptError(Error, ValueError):
    """Stored data failed its checksum or decode."""

    code = ErrorCode.DATA_CORRUPT


class DeviceLostError(Error, RuntimeError):
    code = ErrorCode.DEVICE_LOST


class StaleHandleError(Error, RuntimeError):
    """A handle from an older device generation."""

    code = ErrorCode.STALE_HANDLE


class StrideWeaveTimeoutError(Error, TimeoutError):
    code = ErrorCode.TIMEOUT


class StrideWeaveCancelledError(Error, RuntimeError):
    """Work cancelled, e.g. by runtime shutdown. Also reachable as
    strideweave.CancelledError, a name `from strideweave import *` leaves
    out so that it does not shadow asyncio.CancelledError."""

    code = ErrorCode.CANCELLED


CancelledError = StrideWeaveCancelledError


class InternalError(Error, RuntimeError):
    """A bug in StrideWeave; please report it."""

    code = ErrorCode.INTERNAL


# Indexed by ErrorCode; registered with the native layer by _lib.
CLASSES_BY_CODE = (
    None,
    StrideWeaveTypeError,
    StrideWeaveValueError,
    StrideWeaveRuntimeError,
    StrideWeaveNotImplementedError,
    StrideWeaveIndexError,
    StrideWeaveMemoryError,
    StrideWeaveOSError,
    DataCorruptError,
    DeviceLostError,
    StaleHandleError,
    StrideWeaveTimeoutError,
    StrideWeaveCancelledError,
    InternalError,
)
