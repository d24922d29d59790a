"""What tracing adds to a run: `run_overhead.py` twice, each in a process of its own — without
tracing, then with every span exported over OTLP/HTTP to a receiver on 127.0.0.1 (the tests'
`OtlpReceiver`, which parses each export). Prints both sides' figures, the spans received per
traced run, and the medians' difference.

    .venv/bin/python bench/tracing_overhead.py [--runs 200] [--seconds 5]

The last line reads
`tracing: latency_ratio_off=X latency_ratio_on=Y added_ms=Z spans_per_run=W`.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from run_overhead import parse_arguments

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.otlp_receiver import OtlpReceiver  # noqa: E402


def measured(runs: int, seconds: float, **env) -> dict:
    """`run_overhead.py`'s figures: the orchestrator's median (ms), its latency ratio and its
    runs (warm-up and concurrent phase included)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_overhead.py"), "--runs", str(runs),
         "--seconds", str(seconds)], env={**os.environ, **env}, capture_output=True, text=True,
        check=True)
    print(done.stdout.strip(), flush=True)
    median = float(re.search(r"orchestrator: median ([\d.]+) ms", done.stdout).group(1))
    ratio = float(re.search(r"latency_ratio=([\d.]+)", done.stdout).group(1))
    return {"median": median, "ratio": ratio}


def main(runs: int, seconds: float) -> None:
    print("without tracing:", flush=True)
    off = measured(runs, seconds)
    receiver = OtlpReceiver()
    try:
        print(f"with tracing, to {receiver.endpoint}:", flush=True)
        on = measured(runs, seconds, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
                      OTEL_SERVICE_NAME="langhost-bench")
        runs_traced = sum(span["name"].startswith("invoke_agent") for span in receiver.spans())
        spans = len(receiver.spans())
    finally:
        receiver.stop()
    print(f"tracing: latency_ratio_off={off['ratio']:.2f} latency_ratio_on={on['ratio']:.2f} "
          f"added_ms={on['median'] - off['median']:.2f} "
          f"spans_per_run={spans / max(runs_traced, 1):.1f}")


if __name__ == "__main__":
    args = parse_arguments(__doc__)
    main(args.runs, args.seconds)
