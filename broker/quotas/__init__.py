"""Client quotas on the broker, sans I/O: measurement and throttle decisions as KIP-13 describes them.

``rate`` holds Kafka's windowed statistics (``SampledRate``) and the delay formula (``throttle_time_ms``),
``manager`` one quota kind's sensors per sharing key and its throttle decisions (``QuotaManager``), and ``mutes``
the deadlines until which the broker processes nothing from a throttled client. Every method takes ``now_ms``; the
broker's gRPC layer passes its clock and applies the decisions.
"""

from odradek.broker.quotas.manager import EntityStats, QuotaConfig, QuotaKind, QuotaManager
from odradek.broker.quotas.mutes import Mutes
from odradek.broker.quotas.rate import SampledRate, SampledStat, throttle_time_ms

__all__ = [
    "EntityStats",
    "Mutes",
    "QuotaConfig",
    "QuotaKind",
    "QuotaManager",
    "SampledRate",
    "SampledStat",
    "throttle_time_ms",
]
