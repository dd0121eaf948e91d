"""The log cleaner: compaction of ``cleanup.policy=compact`` logs (Kafka's LogCleaner), as a library.

- ``offset_map``: the bounded key -> last offset map of a pass (``log.cleaner.dedupe.buffer.size``);
- ``policy``: which log to clean and up to where (ratios, compaction lags, active segment, high watermark);
- ``throttle``: the token bucket of ``log.cleaner.io.max.bytes.per.second``;
- ``manager``: first dirty offsets, uncleanable logs, in-progress logs and metrics across threads;
- ``cleaner``: one pass over one log (map, recopy, crash-safe swap via ``Log.replace_segments``);
- ``runner``: the thread that loops over them, and the ``cleaner-offset-checkpoint`` file.

The first four are sans-I/O. Nothing is imported here, so that ``broker.log.log`` and this package do not import
each other at load time.
"""
