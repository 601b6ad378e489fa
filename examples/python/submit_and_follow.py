#!/usr/bin/env python3
"""Submit a 4xA100 training job with a cost limit, follow its output, and exit with its
exit code: the Python SDK's answer to "sbatch, then tail -f, then sacct".

    pip install ./python
    GANTRY_SERVER=http://127.0.0.1:8080 GANTRY_TOKEN_FILE=~/.local/share/gantry/admin.token \\
        python3 examples/python/submit_and_follow.py -- python train.py --epochs 3
"""

import argparse
import sys

from gantry_client import Client, GantryError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--gpu-type", default="A100-80GB")
    parser.add_argument("--budget", type=float, default=50.0, help="stop the job once it has cost this much")
    parser.add_argument("--estimate", default="2h")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()

    gantry = Client()
    try:
        job = gantry.submit(args.command, gpus=args.gpus, gpu_types=[args.gpu_type], cost_limit=args.budget,
                            estimated_duration=args.estimate, name="train", checkpointable=True)
    except GantryError as e:
        print(f"refused: {e}", file=sys.stderr)
        return 2
    print(f"job {job.id}: {job.state}", file=sys.stderr)
    try:
        for chunk in gantry.follow_logs(job.id):
            print(chunk, end="", flush=True)
    except KeyboardInterrupt:
        gantry.cancel(job.id)
        print(f"\njob {job.id}: cancelled", file=sys.stderr)
    (job,) = gantry.wait(job.id)
    print(f"job {job.id}: {job.state}, exit code {job.exit_code}, cost {job.cost:.2f} {job.currency}",
          file=sys.stderr)
    return job.exit_code if job.exit_code is not None else (0 if job.succeeded else 1)


if __name__ == "__main__":
    sys.exit(main())
