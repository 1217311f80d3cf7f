"""gradgate: the Python client of the gradgate gradient-compression gateway.

`gradgate.Client` talks to the gateway of this node through libgradgate (ctypes);
`gradgate.torch` holds the DDP communication hook (importing it imports torch);
`gradgate.cluster` starts gateways on one machine for demos and tests.
"""

from ._native import LibraryNotFound
from .client import AllreduceInfo, Client, DType, JobInfo, Request, Tensor
from .errors import (
    ClosedError,
    ConnectFailedError,
    GradgateError,
    InternalError,
    NonFiniteGradientError,
    InvalidArgumentError,
    PeerFailedError,
    ProtocolError,
    RankInUseError,
    RejectedError,
    ResourceExhaustedError,
    WaitTimeoutError,
)

__version__ = "0.1.0"

__all__ = [
    "AllreduceInfo",
    "Client",
    "ClosedError",
    "ConnectFailedError",
    "DType",
    "GradgateError",
    "InternalError",
    "InvalidArgumentError",
    "JobInfo",
    "LibraryNotFound",
    "NonFiniteGradientError",
    "PeerFailedError",
    "ProtocolError",
    "RankInUseError",
    "RejectedError",
    "Request",
    "ResourceExhaustedError",
    "Tensor",
    "WaitTimeoutError",
]
