"""Queue order of equal jobs (issue 20's finding), against a real standalone server: 1,000
equal 1-GPU jobs from 8 concurrent SDK clients to a drained 8-GPU node, then how far the
queue is from submission order. Not a test: it prints figures.

    python3 bench/queue_order_check.py build/gantry [OTHER_GANTRY ...]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from gantry_client import Client  # noqa: E402


def check(binary: str) -> str:
    work = tempfile.mkdtemp(prefix="gantry-order-")
    ready, token = os.path.join(work, "ready"), os.path.join(work, "data", "admin.token")
    server = subprocess.Popen([binary, "server", "--standalone", "--fake-gpus", "1x8xA100-80GB", "--listen",
                               "127.0.0.1:0", "--data-dir", os.path.join(work, "data"), "--ready-file", ready,
                               "--no-fsync"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(ready):
            time.sleep(0.05)
        with open(ready, encoding="utf-8") as f:
            address = f.read().strip()
        client = Client(address, token_file=token)
        client.request("POST", f"/v1/nodes/{client.nodes()[0]['id']}/drain")

        def submit(count):
            own = Client(address, token_file=token)
            for _ in range(count):
                own.submit("true", gpus=1, estimated_duration=60)

        threads = [threading.Thread(target=submit, args=(125,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        order = [int(q["id"]) for q in client.queue()["queue"]]
        inversions = sum(1 for a, b in zip(order, order[1:]) if a > b)
        displacement = max((abs(pos - (job - 1)) for pos, job in enumerate(order)), default=0)
        return (f"{binary}: {len(order)} queued; adjacent inversions {inversions}; max displacement "
                f"{displacement}; first in line: {order[:8]}")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(check(path))
