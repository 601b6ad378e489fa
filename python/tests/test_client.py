"""The SDK against a real standalone server: submit, follow, wait, arrays, batches, edits,
the cluster and the bill, errors that carry status and field, and the async client."""

import asyncio
import os
from datetime import datetime, timedelta, timezone

from server import ServerTestCase

from gantry_client import AsyncClient, Client, GantryError, GantryUnreachable, Job


class ClientTest(ServerTestCase):
    def test_submit_follow_and_wait(self):
        job = self.client.submit(["sh", "-c", "echo hello; echo oops >&2; exit 3"], gpus=1,
                                 gpu_types=["A100-80GB"], estimated_duration=timedelta(minutes=1), name="sdk")
        self.assertIsInstance(job, Job)
        self.assertEqual(job.name, "sdk")
        self.assertEqual(job.spec["estimated_duration_s"], 60)
        self.assertIn(job.state, ("pending", "running"))
        out = "".join(self.client.follow_logs(job.id))
        self.assertEqual(out, "hello\n")
        (done,) = self.client.wait(job.id, timeout=30)
        self.assertEqual(done.state, "failed")
        self.assertEqual(done.exit_code, 3)
        self.assertTrue(done.done)
        self.assertIsInstance(done.cost, float)
        self.assertLessEqual(done.started_at, done.ended_at)
        self.assertEqual(self.client.logs(job.id, stream="stderr"), "oops\n")
        kinds = [e["kind"] for e in self.client.events(job.id)]
        self.assertIn("started", kinds)
        self.assertIn("failed", kinds)

    def test_arrays_and_batches(self):
        head = self.client.submit_array("echo task $GANTRY_ARRAY_TASK_ID", "0-3%2", gpus=1)
        self.assertEqual(head.array["tasks"], 4)
        tasks = self.client.wait([f"{head.id}_{t}" for t in range(4)], timeout=60)
        self.assertEqual([t.state for t in tasks], ["succeeded"] * 4)
        self.assertEqual(self.client.logs(f"{head.id}_2"), "task 2\n")
        made = self.client.submit_batch([{"command": "true"}, {"command": "true", "gpus": 2, "name": "b"}])
        self.assertEqual([j.name for j in made], ["", "b"])
        before = len(self.client.jobs(limit=10000))
        with self.assertRaises(GantryError) as refused:
            self.client.submit_batch([{"command": "true"}, {"command": "true", "gpus": -1}])
        self.assertEqual(refused.exception.status, 400)
        self.assertEqual(refused.exception.field, "jobs[1].gpus")
        self.assertEqual(len(self.client.jobs(limit=10000)), before)  # all or none
        verdicts = self.client.dry_run([{"command": "true", "gpus": 1}, {"command": "true", "gpus": 9}])
        self.assertTrue(verdicts[0]["ok"])
        self.assertFalse(verdicts[1]["ok"])

    def test_hold_update_release_cancel(self):
        big = self.client.submit("sleep 60", gpus=4, time_limit="10m")
        waiting = self.client.submit("true", gpus=4, estimated_duration=30)
        try:
            self.assertEqual(waiting.state, "pending")
            self.assertEqual(self.client.hold(waiting.id).held, "admin")  # the standalone token is an admin's
            updated = self.client.update(waiting.id, priority="high", time_limit=600)
            self.assertEqual(updated.spec["time_limit_s"], 600)
            self.assertEqual(updated.priority, "high")
            self.assertEqual(self.client.release(waiting.id).held, "")
        finally:
            self.assertIn(self.client.cancel(big.id).state, ("stopping", "cancelled"))
        (ran,) = self.client.wait(waiting.id, timeout=60)
        self.assertEqual(ran.state, "succeeded")

    def test_same_idempotency_key_makes_one_job(self):
        a = self.client.submit("true", idempotency_key="sdk-key-1")
        b = self.client.submit("true", idempotency_key="sdk-key-1")
        self.assertEqual(a.id, b.id)

    def test_lists_filters_cluster_and_bill(self):
        self.client.wait(self.client.submit("true", gpus=1).id, timeout=30)
        hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
        self.assertGreaterEqual(len(self.client.jobs(since=hour_ago)), 1)
        self.assertEqual(self.client.jobs(until=datetime(2000, 1, 1, tzinfo=timezone.utc)), [])
        self.assertEqual(self.client.jobs(state="succeeded", limit=1)[0].state, "succeeded")
        nodes = self.client.nodes()
        self.assertEqual(len(nodes), 1)
        self.assertEqual(len(nodes[0]["gpus"]), 4)
        self.assertIn("queue", self.client.queue())
        self.assertEqual(self.client.cluster()["total_gpus"], 4)
        self.assertIn("lines", self.client.usage(by="team"))
        self.assertIn(",", self.client.report(format="csv").splitlines()[0])
        self.assertEqual(self.client.whoami()["role"], "admin")

    def test_errors_carry_status_and_field(self):
        with self.assertRaises(GantryError) as bad:
            self.client.submit("true", gpuz=2)
        self.assertEqual((bad.exception.status, bad.exception.field), (400, "gpuz"))
        with self.assertRaises(GantryError) as bare:
            self.client.submit(None, gpus=1)
        self.assertEqual(bare.exception.field, "command")
        with self.assertRaises(GantryError) as missing:
            self.client.get("99999")
        self.assertEqual(missing.exception.status, 404)
        with self.assertRaises(GantryError) as unauthorized:
            Client(self.address, token="not-a-token").jobs()
        self.assertEqual(unauthorized.exception.status, 401)
        with self.assertRaises(GantryUnreachable):
            Client("http://127.0.0.1:1", token="x").jobs()
        with self.assertRaises(GantryError) as no_file:
            Client(self.address, token_file=os.path.join(self.dir, "nope"))
        self.assertEqual(no_file.exception.field, "token_file")

    def test_async_client(self):
        async def scenario():
            gantry = AsyncClient(self.address, token_file=self.token_file)
            job = await gantry.submit("echo async", gpus=1)
            chunks = [c async for c in gantry.follow_logs(job.id)]
            (done,) = await gantry.wait(job.id, timeout=30)
            listed = await gantry.jobs(limit=5)
            return "".join(chunks), done, listed

        out, done, listed = asyncio.run(scenario())
        self.assertEqual(out, "async\n")
        self.assertEqual(done.state, "succeeded")
        self.assertTrue(any(j.id == done.id for j in listed))
