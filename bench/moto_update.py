"""How long moto's DynamoDB takes over a shard's arrival (an update of twenty actions), with the
local stack's shortcuts (``codspeed_local.moto_update_checks``: the expression parsed once, its copy a
pickle round trip, checked once on the whole) and with moto's own parse, copy and checks at every
node, in one process, turn about.

    python bench/moto_update.py            # 7 rounds of 200 updates each way
    python bench/moto_update.py --quick    # 3 rounds of 30: a smoke for CI

``update_ms`` is the median round's time per update. Target: the shortcuts' at most 0.6 of
moto's own (the suite makes thousands of such updates; 0.36 measured, 0.62 with the checks alone).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT)]

import boto3
from moto import mock_aws

from codspeed_local.moto_speedups import speed_up_moto
from codspeed_local.moto_update_checks import moto_own_update_checks
from tests.integration.test_moto_speedups import ARRIVAL, NAMES, VALUES

TARGET_RATIO = 0.6


def round_ms(db, updates: int) -> float:
    values = {k: v for k, v in VALUES.items() if k in ARRIVAL}
    start = time.perf_counter()
    for _ in range(updates):
        db.update_item(
            TableName="runs",
            Key={"pk": {"S": "RUN#acme/widgets#1"}},
            UpdateExpression=ARRIVAL,
            ExpressionAttributeNames=NAMES,
            ExpressionAttributeValues=values,
        )
    return (time.perf_counter() - start) * 1000 / updates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 30 updates: a smoke")
    args = parser.parse_args()
    rounds, updates = (3, 30) if args.quick else (7, 200)
    speed_up_moto()
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        db.create_table(
            TableName="runs",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        round_ms(db, updates)  # a first round, untimed: the item made, moto's modules warm
        shortcut, own = [], []
        for _ in range(rounds):  # turn about: the machine's noise falls on both alike
            shortcut.append(round_ms(db, updates))
            with moto_own_update_checks():
                own.append(round_ms(db, updates))
    ratio = statistics.median(shortcut) / statistics.median(own)
    print(f"update_ms moto's own:            {statistics.median(own):.2f}")
    print(f"update_ms parsed, checked once: {statistics.median(shortcut):.2f}")
    print(f"ratio: {ratio:.2f} (target <= {TARGET_RATIO})")
    if not args.quick and ratio > TARGET_RATIO:
        print("target missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
