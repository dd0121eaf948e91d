"""The partition log: segments, indexes, checkpoints, recovery and retention."""

from odradek.broker.log.config import LogConfig, LogManagerConfig
from odradek.broker.log.log import (
    AbortedTxn,
    ActiveProducer,
    AppendInfo,
    AppendOrigin,
    FetchData,
    Log,
    UnexpectedAppendOffsetError,
)
from odradek.broker.log.manager import LogManager

__all__ = [
    "AbortedTxn",
    "ActiveProducer",
    "AppendInfo",
    "AppendOrigin",
    "FetchData",
    "Log",
    "LogConfig",
    "LogManager",
    "LogManagerConfig",
    "UnexpectedAppendOffsetError",
]
