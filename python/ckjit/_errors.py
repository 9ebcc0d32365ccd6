"""The exceptions ckjit raises.

A failed C call raises a CkjitError (a RuntimeError) carrying ckjit's own message
(ckjit_last_error()) and status; two statuses also take the built-in class a Python
caller would catch for them:

    CKJIT_ERROR_INVALID_ARGUMENT -> InvalidArgumentError (CkjitError and ValueError)
    CKJIT_ERROR_UNSUPPORTED      -> UnsupportedError (CkjitError and NotImplementedError)
    anything else                -> CkjitError

Problems the Python side finds before calling C (a CPU tensor, tensors on two
devices, a wrong shape) raise plain ValueError, and a wrong dtype TypeError, so
that no C message is involved.
"""


class CkjitError(RuntimeError):
    """A ckjit C call failed.  `status` is the ckjit_status value (int) and
    `status_name` its constant name ("CKJIT_ERROR_COMPILE")."""

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class InvalidArgumentError(CkjitError, ValueError):
    """CKJIT_ERROR_INVALID_ARGUMENT: the C side refused an argument."""


class UnsupportedError(CkjitError, NotImplementedError):
    """CKJIT_ERROR_UNSUPPORTED: a dtype, arch, head dimension or feature ckjit
    does not have."""


class LibraryNotFoundError(ImportError):
    """No libckjit could be loaded.  `tried` lists (place, why) for each candidate."""

    def __init__(self, message, tried=()):
        super().__init__(message)
        self.tried = list(tried)


_BY_STATUS = {-1: InvalidArgumentError, -2: UnsupportedError}


def exception_class(status):
    """The exception class for a ckjit_status value."""
    return _BY_STATUS.get(status, CkjitError)
