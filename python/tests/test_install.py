"""`pip install ./python` works offline, into a fresh virtual environment."""

import os
import subprocess
import sys
import tempfile
import unittest

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


class InstallTest(unittest.TestCase):
    def test_pip_installs_offline(self):
        with tempfile.TemporaryDirectory(prefix="gantry-sdk-venv-") as env:
            subprocess.run([sys.executable, "-m", "venv", env], check=True)
            python = os.path.join(env, "bin", "python")
            subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--quiet", PYTHON_DIR],
                           check=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            out = subprocess.run([python, "-c", "import gantry_client as g; print(g.__version__, g.Client)"],
                                 check=True, capture_output=True, text=True, cwd=env).stdout
            self.assertTrue(out.startswith("0.1.0 <class 'gantry_client.client.Client'>"), out)
