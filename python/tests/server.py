"""A real standalone Gantry server for the SDK's tests (fake A100s, its own data dir)."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gantry_client import Client  # noqa: E402


class ServerTestCase(unittest.TestCase):
    """Starts `$GANTRY_BINARY server --standalone` once per test class."""

    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("GANTRY_BINARY")
        if not binary or not os.access(binary, os.X_OK):
            raise RuntimeError("set GANTRY_BINARY to a built gantry binary")
        cls.dir = tempfile.mkdtemp(prefix="gantry-sdk-")
        ready = os.path.join(cls.dir, "ready")
        data = os.path.join(cls.dir, "data")
        cls.log = open(os.path.join(cls.dir, "server.log"), "w")
        cls.proc = subprocess.Popen(
            [binary, "server", "--standalone", "--fake-gpus", "1x4xA100-80GB", "--listen", "127.0.0.1:0",
             "--data-dir", data, "--ready-file", ready, "--no-fsync"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if os.path.exists(ready) or cls.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.exists(ready):
            cls.tearDownClass()
            raise RuntimeError("the server did not start")
        with open(ready, encoding="utf-8") as f:
            cls.address = f.read().strip()
        cls.token_file = os.path.join(data, "admin.token")
        cls.client = Client(cls.address, token_file=cls.token_file)

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        try:
            cls.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)
