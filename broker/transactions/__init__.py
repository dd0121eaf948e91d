"""Transactions: the transaction coordinator's parts.

``metadata`` is a transactional id's state (``TxnState``, ``TxnMetadata``), ``records`` the codec of the
``__transaction_state`` records, ``core`` the sans-I/O state machine of one ``__transaction_state`` partition: it
takes requests, persist outcomes and marker completions, and returns the records to write, the markers to send
and the answers. ``coordinator`` is its asyncio shell (loading on leadership, acks=all appends, timers),
``markers`` the channel that writes COMMIT/ABORT markers to partition leaders, ``txn_service`` the service every
listener calls with the typed requests of ``requests``, and ``service`` its gRPC adapter.
"""
