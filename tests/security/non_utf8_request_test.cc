// Bytes that are not UTF-8 where the server keeps text. Before, a request path (percent-
// decoded) or an Idempotency-Key with such bytes went as they were into the audit rows: on
// PostgreSQL (text columns take UTF-8 only) the commit failed and the server ended (exit 75),
// from one unauthenticated request; on SQLite the audit log could no longer be read. Now
// the HTTP layer refuses them (400 naming the field), and the state writes audit rows as
// UTF-8 text whatever it is given.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/encoding.h"
#include "security/security_util.h"
#include "server/port_util.h"
#include "server/scratch_postgres.h"

namespace gantry::testing {
namespace {

std::string Field(const RawAnswer& a) {
  auto j = nlohmann::json::parse(a.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].value("field", "") : "";
}

TEST(NonUtf8Requests, APathOrAnIdempotencyKeyThatIsNotTextIsRefusedAndTheServerGoesOn) {
  ScratchPostgres pg;
  ASSERT_FALSE(pg.url().empty());
  std::string dir = TempPath("non-utf8");
  std::filesystem::remove_all(dir);
  ServerProcess server(dir, "1x4xA100-80GB");
  server.AddArgs({"--db", pg.url()});
  server.Start();
  // No token at all: a mutating request's path of bytes that are not text.
  RawAnswer path =
      RawHttp(server.address(), "DELETE /v1/jobs/%FF%FE1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(path.status, 400) << path.head << path.body;
  EXPECT_EQ(Field(path), "path") << path.body;
  // A user's submit with a key of such bytes.
  std::string body = R"({"gpus": 1, "command": "sleep 100"})";
  RawAnswer key =
      RawHttp(server.address(), std::string("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
                                    kAliceToken + "\r\nIdempotency-Key: k\xff\xfe\r\n" +
                                    "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                                    "\r\nConnection: close\r\n\r\n" + body);
  EXPECT_EQ(key.status, 400) << key.head << key.body;
  EXPECT_EQ(Field(key), "Idempotency-Key") << key.body;
  // The server is still there, made no job, and its audit log reads (the refusal is in it).
  auto root = server.Client(kRootToken);
  auto jobs = root.Get("/v1/jobs");
  ASSERT_TRUE(jobs) << "the server ended";
  EXPECT_EQ(Json(jobs).value("total", -1), 0) << jobs->body;
  auto audit = root.Get("/v1/audit?limit=20");
  ASSERT_TRUE(audit);
  ASSERT_EQ(audit->status, 200) << audit->body;
  EXPECT_NE(audit->body.find("Idempotency-Key not UTF-8 text"), std::string::npos) << audit->body;
}

// Below the HTTP layer (the port proxy, a future route): the state writes what it is given
// as text, and PostgreSQL commits it.
TEST(NonUtf8Requests, TheStateWritesAuditRowsAsTextWhateverItIsGiven) {
  ScratchPostgres pg;
  ASSERT_FALSE(pg.url().empty());
  ControllerOptions o = HarnessOptions();
  auto store = OpenPostgresStore(pg.url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Controller c(std::move(o), std::move(*store));
  ASSERT_TRUE(c.Recover().ok());
  c.Start();
  EXPECT_EQ(Api(c.Cancel(kAlice, "7\xff\xfe")).status, 404);
  JobSpec spec = *ParseJobSpecText("gpus: 1\ncommand: x\n");
  ApiAnswer keyed = Api(c.Submit(kAlice, spec, "key\xc0\xaf"));  // an overlong '/'
  EXPECT_EQ(keyed.status, 400) << keyed.body.dump();
  EXPECT_EQ(keyed.body["error"].value("field", ""), "Idempotency-Key");
  // Committed (a failed commit would have ended this process), and read back as text.
  ApiAnswer audit = Api(c.AuditLog(kAdmin, 10));
  ASSERT_EQ(audit.status, 200) << audit.body.dump();
  bool cancel_seen = false;
  for (const auto& row : audit.body["audit"]) {
    for (const char* f : {"action", "target", "detail"}) EXPECT_LT(InvalidUtf8At(row.value(f, "")), 0) << row.dump();
    cancel_seen |= row.value("action", "") == "DELETE /v1/jobs/7\xef\xbf\xbd\xef\xbf\xbd";
  }
  EXPECT_TRUE(cancel_seen) << audit.body.dump();
}

}  // namespace
}  // namespace gantry::testing
