"""``odradek chaos run``: torture a local cluster with faults while a workload runs, then check that no
acknowledged record was lost, duplicated, reordered or shown and then taken back (chaos/runner.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from odradek.client.cli.common import CommandError, format_options
from odradek.client.cli.output import to_json


def _duration(value: str) -> float:
    text = value.strip().lower()
    scale = 60.0 if text.endswith("m") else 1.0
    try:
        return float(text.rstrip("sm")) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {value!r} (e.g. 60s, 2m)") from None


def register(sub: argparse._SubParsersAction) -> None:
    chaos = sub.add_parser("chaos", help="fault-injection runs with a no-loss checker").add_subparsers(
        dest="chaos_command", required=True, metavar="COMMAND"
    )
    run = chaos.add_parser(
        "run", help="run a workload under a seeded fault schedule and check its history", parents=[format_options()]
    )
    run.add_argument("--duration", type=_duration, default=60.0, help="how long faults are injected (60s, 2m)")
    run.add_argument(
        "--faults",
        default="kill,pause,kill-leader,pause-leader,kill-controller,partition",
        help="comma-separated, or 'all': kill, pause, kill-leader, pause-leader, kill-controller, partition, bridge, "
        "slow, isolate-kill-leader, lost-responses, late-responses, crash-unsynced, wipe-disk, disk-full, "
        "clock-skew, reassign, decommission (these two run 4 brokers); with a kafka- workload also late-requests; with "
        "--workload group, kafka-group or kafka-share also kill-coordinator, pause-coordinator, kill-consumer; with "
        "--workload "
        "txn, kafka-txn or kafka-copy also kill-coordinator, pause-coordinator (the transaction coordinator)",
    )
    run.add_argument(
        "--workload",
        choices=("default", "group", "txn", "kafka", "kafka-group", "kafka-txn", "kafka-copy", "kafka-share"),
        default="default",
        help="default: producers and assign readers; group: the consumers are members of one group that commit "
        "after processing (checked for unprocessed records and lost or regressed commits); txn: transactional "
        "producers that commit or abort, read_committed readers (checked for lost commits, aborted and uncommitted "
        "reads, partial transactions); kafka, kafka-group, kafka-txn: the same with librdkafka (confluent-kafka) "
        "clients on the brokers' Kafka listeners; kafka-copy: librdkafka copiers that copy the topic to another in "
        "transactions that commit their group's offsets (checked for records copied other than exactly once); "
        "kafka-share: librdkafka share consumers (KIP-932) that accept, release, reject or hold past its lock what "
        "they receive (checked for records lost, accepted twice or delivered past the delivery count limit)",
    )
    run.add_argument(
        "--consumers",
        type=int,
        default=2,
        help="consumers (group members with --workload group, kafka-group or kafka-share, copiers with kafka-copy)",
    )
    run.add_argument("--seed", type=int, default=1)
    run.add_argument(
        "--combine",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0 to 1) that a step injects a second fault kind with its own, both healed together; "
        "pairs that cannot be healed together safely (two data-losing faults) are never drawn",
    )
    run.add_argument("--interval", type=float, default=3.0, help="seconds between fault starts")
    run.add_argument("--partitions", type=int, default=6)
    run.add_argument(
        "--rate", type=float, help="writes per second per producer (200), transactions with the txn workloads (20)"
    )
    run.add_argument(
        "--tls",
        action="store_true",
        help="a TLS cluster: its own CA, every listener SSL with client certificates required (mTLS between nodes); "
        "the workload, the metadata churn and the nemesis connect with TLS (not with the response faults)",
    )
    run.add_argument(
        "--security",
        action="store_true",
        help="--tls plus SCRAM on the client listeners and the authorizer: the workload logs in as a SCRAM user "
        "with only the ACLs it needs",
    )
    run.add_argument("--dir", type=Path, help="where the run's cluster lives (default: a temporary directory)")
    run.add_argument(
        "--keep",
        action="store_true",
        help="keep the run's directory (node logs) afterwards (kept anyway when violations are found without --bug)",
    )
    run.add_argument("--history", type=Path, help="write the history as JSON Lines here")
    run.add_argument("--json", type=Path, help="write the report as JSON here")
    run.add_argument(
        "--unsafe-bug",
        choices=("ack-before-replication", "read-uncommitted", "skip-records", "drop-records"),
        help="run with this injected bug, to see the checker catch it: ack-before-replication in every node; "
        "read-uncommitted (--workload txn or kafka-txn) in the readers, which then ignore the transactions; "
        "skip-records (not the kafka workloads) in the consumers, which now and then pass over a record without a "
        "seek; drop-records (--workload kafka-share) in the share consumers, which accept every 20th record without "
        "processing it",
    )
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from odradek.chaos.nemesis import ALL_FAULTS, COORDINATOR_FAULTS, GROUP_FAULTS, REQUEST_FAULTS, RESPONSE_FAULTS
    from odradek.chaos.runner import RunOptions, run

    # The faults a workload cannot take: the group faults need a group; the transactional workloads have
    # transaction coordinators but no group members. A kafka- workload takes what its gRPC counterpart takes; the
    # copy workload's coordinator faults hit its transaction coordinators.
    inapplicable = {
        "default": set(GROUP_FAULTS),
        "group": set(),
        "share": set(),
        "txn": set(GROUP_FAULTS) - set(COORDINATOR_FAULTS),
    }
    kafka = "kafka-" if args.workload.startswith("kafka") else ""
    family = {"kafka": "default", "kafka-copy": "txn"}.get(args.workload, args.workload.removeprefix("kafka-"))
    refused = inapplicable[family] | (set() if kafka else set(REQUEST_FAULTS))  # clients through the Kafka listener
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    if faults == ["all"]:
        faults = [f for f in ALL_FAULTS if f not in refused]
    unknown = sorted(set(faults) - set(ALL_FAULTS))
    if unknown or not faults:
        raise CommandError(f"unknown fault {unknown[0] if unknown else '(none)'}; choose from {', '.join(ALL_FAULTS)}")
    if set(faults) & refused:
        needs = [
            f"{f} (need a kafka- workload)"
            if f in REQUEST_FAULTS
            else f"{f} (need --workload {kafka}group{f' or {kafka}txn' if f in COORDINATOR_FAULTS else ''})"
            for f in sorted(set(faults) & refused)
        ]
        raise CommandError(f"faults that do not apply to --workload {args.workload}: {'; '.join(needs)}")
    if args.unsafe_bug == "read-uncommitted" and args.workload not in ("txn", "kafka-txn"):
        raise CommandError(f"--unsafe-bug read-uncommitted needs --workload {kafka}txn")
    if args.unsafe_bug == "drop-records" and args.workload != "kafka-share":
        raise CommandError("--unsafe-bug drop-records needs --workload kafka-share")
    if args.unsafe_bug == "skip-records" and kafka:
        raise CommandError("--unsafe-bug skip-records needs a workload of odradek's own client (default, group, txn)")
    if (args.tls or args.security) and set(faults) & {*RESPONSE_FAULTS, *REQUEST_FAULTS}:
        option = "--security" if args.security else "--tls"
        proxied = sorted(set(faults) & {*RESPONSE_FAULTS, *REQUEST_FAULTS})
        raise CommandError(f"faults that do not run with {option}: {', '.join(proxied)}")
    if args.consumers < 1:
        raise CommandError("--consumers must be at least 1")
    if not 0.0 <= args.combine <= 1.0:
        raise CommandError("--combine must be between 0 and 1")
    if args.rate is not None and args.rate <= 0:
        raise CommandError("--rate must be positive")
    options = RunOptions(
        duration=args.duration,
        faults=faults,
        seed=args.seed,
        interval=args.interval,
        partitions=args.partitions,
        rate=args.rate,
        directory=args.dir,
        keep=args.keep,
        history_path=args.history,
        bug=args.unsafe_bug or "",
        workload=args.workload,
        consumers=args.consumers,
        tls=args.tls,
        security=args.security,
        combine=args.combine,
    )
    # With --format json, stdout carries only the report; the progress lines go to stderr.
    progress = sys.stderr if args.format == "json" else sys.stdout
    result = run(options, log=lambda line: print(line, file=progress, flush=True))
    if args.format == "json":
        print(to_json(result.to_dict()))
    else:
        print(result.report.summary_table())
        print(f"faults injected: {result.faults_injected} ({result.mechanism}); metadata: {result.metadata_detail}")
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_dict(), indent=2))
    return 0 if result.ok else 1
