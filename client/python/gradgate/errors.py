"""The exceptions of the gradgate package, one per gg_status of the C interface.

Every failed library call raises a GradgateError subclass that carries the status name
("timeout", "peer_failed", ...) and the library's message (gg_last_error), so that callers can
catch a kind of failure (e.g. a TimeoutError on wait) and logs say what went wrong and where.
"""


class GradgateError(Exception):
    """A libgradgate call failed. `status` is the status name, `message` the library's message."""

    status = "error"

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(f"{self.status}: {message}")


class InvalidArgumentError(GradgateError, ValueError):
    status = "invalid_argument"


class ConnectFailedError(GradgateError, ConnectionError):
    status = "connect_failed"


class ProtocolError(GradgateError):
    status = "protocol_error"


class WaitTimeoutError(GradgateError, TimeoutError):
    """The wait ended before the all-reduce did (the request still runs and can be waited on),
    or, at connect, no connection came within the time given."""

    status = "timeout"


class PeerFailedError(GradgateError):
    status = "peer_failed"


class ClosedError(GradgateError, ConnectionError):
    status = "closed"


class ResourceExhaustedError(GradgateError):
    status = "resource_exhausted"


class RejectedError(GradgateError):
    status = "rejected"


class RankInUseError(RejectedError):
    """Another connection holds this local rank: a worker that has not left yet (connecting with
    a connect_timeout_ms waits it out), or two workers given the same rank."""

    status = "rank_in_use"


class InternalError(GradgateError):
    status = "internal"


class NonFiniteGradientError(GradgateError, ArithmeticError):
    """A node's gradient sum of this step held NaN or infinite values: the step is skipped on
    every node (the buffer's values are unspecified) and the tensor goes on at its next step."""

    status = "nonfinite_gradient"


# Indexed by the gg_status value (GG_INVALID_ARGUMENT = 1, ...).
BY_STATUS = {
    1: InvalidArgumentError,
    2: ConnectFailedError,
    3: ProtocolError,
    4: WaitTimeoutError,
    5: PeerFailedError,
    6: ClosedError,
    7: ResourceExhaustedError,
    8: RejectedError,
    9: InternalError,
    10: NonFiniteGradientError,
    11: RankInUseError,
}


def from_status(code, status_name, message):
    """The exception for a failed call: its class from `code`, its name as the library spells it."""
    return BY_STATUS.get(code, GradgateError)(message, status=status_name)
