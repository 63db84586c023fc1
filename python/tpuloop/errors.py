"""tpuloop.errors: the C library's statuses as Python exceptions.

Each class is TensorFlow's name for the error (tf.errors) and also the
built-in exception a Python user catches for it, as the C header says
(TL_EINVAL is Python's ValueError, TL_ETYPE TypeError, ...): a bad
configuration value raises InvalidArgumentError, which `except ValueError`
catches as it catches TensorFlow's RunConfig errors. The message is the C
library's, which names the field, the value and what was allowed.
"""

OK = 0
EINVAL, ETYPE, ERUNTIME, ENOTFOUND, ENOTIMPL, ENOMEM, EIO, EPARSE, EUNKNOWN, EBUSY = range(-1, -11, -1)


class OpError(Exception):
    """tf.errors.OpError: every error the C library reports; .status is its tl_status."""
    status = ERUNTIME

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidArgumentError(OpError, ValueError):
    status = EINVAL


class InvalidTypeError(OpError, TypeError):
    status = ETYPE


class InternalError(OpError, RuntimeError):
    status = ERUNTIME


class NotFoundError(OpError, LookupError):
    status = ENOTFOUND


class UnimplementedError(OpError, NotImplementedError):
    status = ENOTIMPL


class ResourceExhaustedError(OpError, MemoryError):
    status = ENOMEM


class DataLossError(OpError, OSError):
    """An unreadable or malformed file (TL_EIO, TL_EPARSE)."""
    status = EIO


class UnknownOptionError(OpError, ValueError):
    """A configuration key no option has (TL_EUNKNOWN); the message suggests the nearest."""
    status = EUNKNOWN


class UnavailableError(OpError, RuntimeError):
    """A resource another holder has (TL_EBUSY): a model_dir another run trains in."""
    status = EBUSY


class FileNotFoundOpError(NotFoundError, FileNotFoundError):
    """A file that is not there (TL_EIO from a missing file): both tf.errors.NotFoundError and
    Python's FileNotFoundError."""
    status = EIO


_BY_STATUS = {EINVAL: InvalidArgumentError, ETYPE: InvalidTypeError, ERUNTIME: InternalError,
              ENOTFOUND: NotFoundError, ENOTIMPL: UnimplementedError, ENOMEM: ResourceExhaustedError,
              EIO: DataLossError, EPARSE: DataLossError, EUNKNOWN: UnknownOptionError, EBUSY: UnavailableError}


def from_status(status, message):
    """The exception of a C status and message."""
    if status == EIO and "No such file" in message:
        return FileNotFoundOpError(message, status)
    return _BY_STATUS.get(status, OpError)(message, status)


def status_of(exc):
    """The C status a Python exception stands for, when a callback raises it."""
    if isinstance(exc, OpError):
        return exc.status
    for cls, st in ((MemoryError, ENOMEM), (NotImplementedError, ENOTIMPL), (TypeError, ETYPE),
                    (KeyError, ENOTFOUND), (OSError, EIO), (ValueError, EINVAL)):
        if isinstance(exc, cls):
            return st
    return ERUNTIME
