"""make lint's complexity budget: radon's count of blocks of rank C or worse (a cyclomatic
complexity over 10), functions, methods and classes as ``radon cc -n C`` lists them, in the product
code: the functions, the client and the local stack. ruff's
McCabe check (C901, 10 at most) counts a comprehension or a boolean chain once; radon counts each
branch in them, where this code keeps most of its branching. The budget only goes down: lower it
with each function split.

    .venv/bin/python tools/complexity.py        # exit 1, naming the blocks, past the budget
"""

import sys
from pathlib import Path

from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("functions", "client/codspeed_client", "local/codspeed_local")
BUDGET = 15  # blocks of rank C or worse: 83 when it was set (functions and methods alone), 29 with classes at a9f6d61


def ranked_c_or_worse() -> list[tuple[str, str, int]]:
    """(where, block, complexity) of every block of rank C or worse, the most complex first."""
    found = []
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for block in cc_visit(path.read_text()):  # functions, methods and classes (a class's: its methods')
                if cc_rank(block.complexity) >= "C":
                    where = f"{path.relative_to(ROOT)}:{block.lineno}"
                    found.append((where, block.fullname, block.complexity))
    return sorted(found, key=lambda b: -b[2])


def main() -> int:
    found = ranked_c_or_worse()
    print(f"complexity: {len(found)} blocks of rank C or worse (budget {BUDGET})")
    if len(found) > BUDGET:
        for where, name, complexity in found:
            print(f"  {where} {name} {cc_rank(complexity)} ({complexity})")
        print(f"complexity: {len(found) - BUDGET} over the budget: split what grew, or what is most complex")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
