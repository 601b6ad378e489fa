"""Tries every Gantry command of docs/SLURM.md, in order, against a real standalone
server: each must exit 0. $ID is a job kept pending (it waits on a running one) until the
sheet's `update -d afterany:$DONE` frees it, and then runs long enough for the sheet's
`cancel $ID` to find it; $DONE a job that succeeded, $ARRAY an array whose tasks wait,
$HELD a running job that holds a GPU, NODE a node."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def sheet_commands():
    """The second column's `gantry ...` code spans, in the order of the file."""
    commands = []
    with open(os.path.join(SOURCE, "docs", "SLURM.md"), encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.split(" | ")]
            if not line.startswith("|") or len(cells) < 2:
                continue
            found = re.match(r"^`(gantry [^`]+)`$", cells[1])
            if found:
                commands.append(found.group(1))
    return commands


class SlurmCheatSheet(unittest.TestCase):
    def setUp(self):
        self.binary = os.environ["GANTRY_BINARY"]
        self.dir = tempfile.mkdtemp(prefix="gantry-slurm-")
        ready = os.path.join(self.dir, "ready")
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        # The cheat sheet's --mail-user line needs a mail transport: one that keeps the mail here.
        sendmail = os.path.join(self.dir, "sendmail")
        with open(sendmail, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\ncat >> %s\n" % os.path.join(self.dir, "mail.txt"))
        os.chmod(sendmail, 0o755)
        self.server = subprocess.Popen(
            [self.binary, "server", "--standalone", "--fake-gpus", "2x8xA100-80GB", "--listen", "127.0.0.1:0",
             "--data-dir", os.path.join(self.dir, "data"), "--ready-file", ready, "--no-fsync",
             "--sendmail", sendmail],
            stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if os.path.exists(ready):
                break
            time.sleep(0.05)
        with open(ready, encoding="utf-8") as f:
            address = f.read().strip()
        self.env = {**os.environ, "GANTRY_SERVER": address,
                    "GANTRY_TOKEN_FILE": os.path.join(self.dir, "data", "admin.token")}
        self.work = os.path.join(self.dir, "work")
        os.makedirs(self.work)
        with open(os.path.join(self.work, "jobs.txt"), "w", encoding="utf-8") as f:
            f.write("priority,script,conda_env,arguments,allowed_gpus\n2,train.py,,--lr 0.1,A100-80GB\n")

    def tearDown(self):
        self.server.terminate()
        self.server.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def gantry(self, command):
        done = subprocess.run(["bash", "-c", command.replace("gantry ", self.binary + " ", 1)], cwd=self.work,
                              env=self.env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        return done.returncode, done.stdout + done.stderr

    def submit(self, args):
        rc, out = self.gantry(f"gantry submit -o json {args}")
        self.assertEqual(rc, 0, out)
        return re.search(r'"id": "([^"]+)"', out).group(1)

    def test_every_line_of_the_sheet_runs(self):
        commands = sheet_commands()
        self.assertGreater(len(commands), 35)
        blocker = self.submit("-g 1 --hold-gpus 1h")
        done = self.submit("-g 1 -- echo done")
        rc, out = self.gantry(f"gantry wait {done} --timeout 60")
        self.assertEqual(rc, 0, out)
        places = {"$ID": self.submit(f"-g 1 -d afterok:{blocker} -- sleep 300"),
                  "$DONE": done,
                  "${ARRAY}": self.submit(f"-g 1 --array 0-9 -d afterok:{blocker} -- true"),
                  "$HELD": blocker,
                  "NODE": "a100-80gb-0"}
        for command in commands:
            for name, value in places.items():
                command = command.replace(name, value)
            rc, out = self.gantry(command)
            self.assertEqual(rc, 0, f"{command}\n{out}")


if __name__ == "__main__":
    sys.exit(unittest.main())
