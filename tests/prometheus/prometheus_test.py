"""Debian's Prometheus against a live Gantry server with the shipped examples: promtool
checks the rules and the server's /metrics, Prometheus scrapes it for a few intervals with
examples/prometheus/prometheus.yml (its target and intervals changed for the test), and
every PromQL query of examples/grafana/gantry-dashboard.json returns series through
Prometheus' HTTP API; the unhealthy-GPU and budget alerts go active."""

import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLES = os.path.join(SOURCE, "examples")
# dcgm-exporter's label names, kept so its dashboards work: promtool's snake_case lint is
# the one finding accepted, and only for these.
DCGM_LABEL_LINT = re.compile(r"^(DCGM_FI_[A-Z_]+|gantry_gpu_healthy) label names should be written in 'snake_case'")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, token=None, body=None, method=None):
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.read().decode()


class PrometheusExamples(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gantry-prom-")
        config = os.path.join(self.dir, "config")
        os.makedirs(config)
        self.ana = secrets.token_hex(16)
        with open(os.path.join(config, "users.yaml"), "w", encoding="utf-8") as f:
            f.write("teams:\n  vision: {unix_account: nobody}\nusers:\n"
                    f"  - {{name: ana, team: vision, role: user, token_sha256: {hashlib.sha256(self.ana.encode()).hexdigest()}}}\n")
        with open(os.path.join(config, "team_quotas.yaml"), "w", encoding="utf-8") as f:
            f.write("teams:\n  vision: {guaranteed: {any: 6}, budget: {monthly_cost: 0.0001, on_exceed: alert}}\n"
                    "  nlp: {guaranteed: {any: 2}}\n")
        ready = os.path.join(self.dir, "ready")
        self.log = open(os.path.join(self.dir, "server.log"), "w", encoding="utf-8")
        self.server = subprocess.Popen(
            [os.environ["GANTRY_BINARY"], "server", "--standalone", "--fake-gpus", "2x4xA100-80GB", "--listen",
             "127.0.0.1:0", "--config", config, "--data-dir", os.path.join(self.dir, "data"), "--ready-file", ready,
             "--no-fsync"], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if os.path.exists(ready):
                break
            time.sleep(0.05)
        with open(ready, encoding="utf-8") as f:
            self.url = f.read().strip()
        with open(os.path.join(self.dir, "data", "admin.token"), encoding="utf-8") as f:
            self.admin = f.read().strip()
        self.prometheus = None

    def tearDown(self):
        if self.prometheus:
            self.prometheus.terminate()
            self.prometheus.wait(timeout=30)
            self.prom_log.close()
        self.server.terminate()
        self.server.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start_prometheus(self):
        with open(os.path.join(EXAMPLES, "prometheus", "prometheus.yml"), encoding="utf-8") as f:
            config = f.read()
        host = urllib.parse.urlparse(self.url).netloc
        config = config.replace('"127.0.0.1:8080"', f'"{host}"').replace("15s", "1s")
        config = config.replace("- gantry-rules.yml", "- " + os.path.join(EXAMPLES, "prometheus", "gantry-rules.yml"))
        path = os.path.join(self.dir, "prometheus.yml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(config)
        port = free_port()
        self.prom = f"http://127.0.0.1:{port}"
        self.prom_log = open(os.path.join(self.dir, "prometheus.log"), "w", encoding="utf-8")
        self.prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={path}", f"--storage.tsdb.path={self.dir}/tsdb",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=self.prom_log, stderr=subprocess.STDOUT)

    def query(self, expr):
        _, body = http(f"{self.prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        answer = json.loads(body)
        self.assertEqual(answer["status"], "success", expr)
        return answer["data"]["result"]

    def test_rules_metrics_and_dashboard_queries(self):
        done = subprocess.run(["promtool", "check", "rules", os.path.join(EXAMPLES, "prometheus", "gantry-rules.yml")],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        done = subprocess.run(["promtool", "check", "config", "--syntax-only",
                               os.path.join(EXAMPLES, "prometheus", "prometheus.yml")], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

        # Jobs: two run (6 GPUs: vision below its guarantee of 6 with the third waiting), one
        # waits; a fault fences a GPU.
        for gpus in (3, 3, 4):
            status, body = http(self.url + "/v1/jobs", self.ana, {"gpus": gpus, "command": "sleep 300"})
            self.assertEqual(status, 201, body)
        status, body = http(self.url + "/v1/nodes/a100-80gb-1/gpus/3/fault", self.admin, {"xid": 79}, "POST")
        self.assertEqual(status, 200, body)
        time.sleep(2)

        _, metrics = http(self.url + "/metrics")
        lint = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True)
        findings = [l for l in (lint.stdout + lint.stderr).splitlines() if l.strip()]
        self.assertEqual([l for l in findings if not DCGM_LABEL_LINT.match(l)], [], metrics[:2000])
        for family in ("gantry_queue_jobs", "gantry_queue_oldest_wait_seconds", "gantry_team_guaranteed_gpus",
                       "gantry_gpus_unavailable", "DCGM_FI_DEV_GPU_UTIL"):
            self.assertIn(family + "{", metrics)

        self.start_prometheus()
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if [r for r in self.query('up{job="gantry"}') if r["value"][1] == "1"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            self.fail("Prometheus never scraped the server")
        time.sleep(5)  # a few scrapes and rule evaluations

        with open(os.path.join(EXAMPLES, "grafana", "gantry-dashboard.json"), encoding="utf-8") as f:
            dashboard = json.load(f)
        exprs = [t["expr"].replace("$node", ".*") for p in dashboard["panels"] for t in p["targets"]]
        self.assertGreaterEqual(len(exprs), 12)
        for expr in exprs:
            self.assertTrue(self.query(expr), f"no series for the dashboard's query {expr}")
        # The job on a GPU is gantry_job after the example's relabelling.
        self.assertTrue(self.query('DCGM_FI_DEV_GPU_UTIL{gantry_job!=""}'))

        _, body = http(f"{self.prom}/api/v1/rules")
        rules = {r["name"]: r for g in json.loads(body)["data"]["groups"] for r in g["rules"]}
        self.assertEqual({r["health"] for r in rules.values()}, {"ok"}, rules)
        self.assertIn(rules["GantryGpuUnhealthy"]["state"], ("pending", "firing"))
        self.assertEqual(rules["GantryBudgetOver80"]["state"], "firing")
        self.assertEqual(rules["GantryTeamStarved"]["state"], "inactive")  # waited seconds, not 45 minutes


if __name__ == "__main__":
    unittest.main()
