#!/usr/bin/env python3
"""Record codec benchmark: encode/decode rates of 100-byte records against kafka-python's record code, measured in
the same run on the same records, plus the broker's per-batch validation cost.

Each figure is the best of several interleaved rounds (ours, kafka-python, ours, ...), so a noisy neighbour slows
both sides rather than skewing the ratio. Our decode figures include the batch CRC check (``read_batches``
validates); kafka-python's iteration does not check it. kafka-python needs python-snappy for snappy, so snappy has
no ratio without it. The figures above the last block use the codec this process selected (``record codec:``
line; ODRADEK_NO_EXTENSIONS=1 forces the reference); the last block runs the record codec's own functions in both
implementations, native and pure-Python reference, against kafka-python in the same run. Runs in about 25 s;
prints one line per figure.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable

from odradek.client.record import codec, reference
from odradek.client.record.batch import Record, read_batches
from odradek.client.record.builder import BatchBuilder, encode_batch
from odradek.client.record.header import COMPRESSION_CODES, HEADER_SIZE, check_record_count, validate_batch
from odradek.client.structs import ConsumerRecord, TopicPartition

with warnings.catch_warnings():  # kafka-python's protocol package uses deprecated importlib.resources calls
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

TS = 1_700_000_000_000
VALUE_SIZE = 100
ROUNDS = 5


def per_call(fn: Callable[[], object], seconds: float) -> float:
    """Seconds per call of ``fn`` over a run of at least ``seconds`` (doubling the calls until it is that long)."""
    fn()
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls
        calls *= 2


def compare(ours: Callable[[], object], theirs: Callable[[], object] | None, budget: float) -> tuple[float, float]:
    """Best seconds per call of each, over ROUNDS interleaved rounds (inf for a missing ``theirs``)."""
    best_ours = best_theirs = float("inf")
    for _ in range(ROUNDS):
        best_ours = min(best_ours, per_call(ours, budget / ROUNDS / 4))
        if theirs is not None:
            best_theirs = min(best_theirs, per_call(theirs, budget / ROUNDS / 4))
    return best_ours, best_theirs


def report(label: str, count: int, ours: float, theirs: float) -> None:
    line = f"{label}: {count / ours / 1e6:.2f}M records/s"
    if theirs != float("inf"):
        line += f" ({theirs / ours:.1f}x kafka-python's {count / theirs / 1e6:.2f}M records/s)"
    print(line, flush=True)


def make_values(count: int) -> list[bytes]:
    """Distinct, moderately compressible 100-byte values (a JSON-ish prefix and random hex)."""
    return [(b'{"id": %d, "data": "%s"}' % (i, os.urandom(40).hex().encode()))[:VALUE_SIZE] for i in range(count)]


def kafka_builder(codec: int) -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )


def bench_codec(name: str, values: list[bytes], budget: float) -> None:
    codec = COMPRESSION_CODES[name]
    count = len(values)
    kafka_supports = codec != COMPRESSION_CODES["snappy"] or kafka.codec.has_snappy()  # needs python-snappy

    def kafka_encode() -> bytes:
        builder = kafka_builder(codec)
        for i, value in enumerate(values):
            builder.append(i, TS, None, value, [])
        return bytes(builder.build())

    def builder_encode() -> bytes:
        builder = BatchBuilder(codec)
        for value in values:
            builder.append(TS, None, value)
        return builder.build()

    tag = f"{name} batch of {count} x {VALUE_SIZE} B"
    theirs = kafka_encode if kafka_supports else None
    report(
        f"encode_batch, {tag}",
        count,
        *compare(lambda: encode_batch(values, timestamps=TS, compression=codec), theirs, budget),
    )
    report(f"BatchBuilder.append, {tag}", count, *compare(builder_encode, theirs, budget))

    buf = encode_batch(values, timestamps=TS, compression=codec)
    assert [r.value for b in read_batches(buf) for r in b.records()] == values

    def ours_decode() -> list:
        return [record for batch in read_batches(buf) for record in batch.records()]

    def kafka_decode() -> list:
        return list(DefaultRecordBatch(buf))

    report(f"decode, {tag}", count, *compare(ours_decode, kafka_decode if kafka_supports else None, budget))


def bench_keyed(values: list[bytes], budget: float) -> None:
    """The general path: a key and its own timestamp per record."""
    keys = [b"key-%d" % i for i in range(len(values))]
    timestamps = [TS + i % 10 for i in range(len(values))]

    def kafka_encode() -> bytes:
        builder = kafka_builder(0)
        for i, value in enumerate(values):
            builder.append(i, timestamps[i], keys[i], value, [])
        return bytes(builder.build())

    times = compare(lambda: encode_batch(values, keys, timestamps), kafka_encode, budget)
    report(
        f"encode_batch, none batch of {len(values)} x {VALUE_SIZE} B, keyed, per-record timestamps", len(values), *times
    )


def fit_batch(values: list[bytes], size: int) -> list[bytes]:
    """The longest prefix of ``values`` whose uncompressed batch fits in ``size`` bytes."""
    count = len(values)
    while len(encode_batch(values[:count], timestamps=TS)) > size:
        count -= 1
    return values[:count]


def bench_validation(values: list[bytes]) -> None:
    buf = encode_batch(values, timestamps=TS)
    header = validate_batch(buf)
    check, validate = compare(lambda: check_record_count(buf, header), lambda: validate_batch(buf), 1.0)
    print(
        f"check_record_count: {check * 1e6:.1f} us per {len(buf)} B batch of {len(values)} records "
        f"({check / len(values) * 1e9:.0f} ns/record); validate_batch (header + CRC32C): {validate * 1e6:.1f} us",
        flush=True,
    )


def bench_modes(values: list[bytes], budget: float) -> None:
    """The codec's functions, native and reference, on one uncompressed batch; kafka-python's encode and decode of
    the same records as the baseline."""
    try:
        from odradek.client.record import _native
    except ImportError:
        print("native vs reference: the native codec is not built", flush=True)
        return
    count = len(values)
    buf = encode_batch(values, timestamps=TS)
    start, end = HEADER_SIZE, len(buf)
    tp = TopicPartition("topic", 0)

    def kafka_encode() -> bytes:
        builder = kafka_builder(0)
        for i, value in enumerate(values):
            builder.append(i, TS, None, value, [])
        return bytes(builder.build())

    def kafka_decode() -> list:
        return list(DefaultRecordBatch(buf))

    kafka_enc = min(per_call(kafka_encode, budget / 10) for _ in range(3))
    kafka_dec = min(per_call(kafka_decode, budget / 10) for _ in range(3))
    tag = f"{count} x {VALUE_SIZE} B, {len(buf)} B batch"
    for label, baseline, run in [
        ("encode_records", kafka_enc, lambda m: lambda: m.encode_records(values, None, None, None)),
        (
            "encode_record each",
            kafka_enc,
            lambda m: lambda: [m.encode_record(i, 0, None, v) for i, v in enumerate(values)],
        ),
        (
            "decode_records -> Record",
            kafka_dec,
            lambda m: lambda: m.decode_records(buf, start, end, count, 0, TS, None, Record, (), ()),
        ),
        (
            "decode_records -> ConsumerRecord",
            kafka_dec,
            lambda m: lambda: m.decode_records(buf, start, end, count, 0, TS, None, ConsumerRecord, tp, (0,)),
        ),
        ("records_end (validation walk)", None, lambda m: lambda: m.records_end(buf, start, count)),
    ]:
        native, python = compare(run(_native), run(reference), budget)
        line = (
            f"{label}, {tag}: native {count / native / 1e6:.2f}M records/s, reference {count / python / 1e6:.2f}M "
            f"({python / native:.1f}x)"
        )
        if baseline is not None:
            line += f"; vs kafka-python: native {baseline / native:.1f}x, reference {baseline / python:.1f}x"
        print(line, flush=True)


def main() -> None:
    started = time.perf_counter()
    print(f"record codec: {codec.describe()}", flush=True)
    values = make_values(1000)
    bench_codec("none", values, budget=1.5)
    bench_codec("none", fit_batch(values, 16384), budget=1.5)  # the producer's default batch.size
    bench_keyed(values, budget=1.0)
    for name in ("gzip", "snappy", "lz4", "zstd"):
        bench_codec(name, values, budget=0.5)
    bench_validation(fit_batch(values, 16384))
    bench_modes(fit_batch(values, 16384), budget=1.0)
    print(f"total bench time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
