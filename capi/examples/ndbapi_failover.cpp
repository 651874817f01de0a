/*
 * ndbapi_failover.cpp: inserts that go on while a data node fails, as an NDB API
 * program writes them: a temporary error (4010 node failure, 4035 cluster temporarily
 * unavailable, 266 lock wait...) is retried after a pause; an unknown result (4012:
 * the commit may have happened) is resolved by reading the row back. At the end
 * every row is read back and counted.
 *
 * Run on its own it inserts on the embedded cluster; the test suite runs it against
 * rndb_mgmd and two rndbd and kills one data node with SIGKILL while it runs. Either
 * way the output is the same: every row is there exactly once.
 */
#include <NdbApi.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#define APIERROR(error)                                                                  \
  {                                                                                      \
    printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, (error).code, \
           (error).message);                                                             \
    exit(-1);                                                                            \
  }

static const Uint32 ROWS = 2000;
static const int MAX_TRIES = 200;

/* Whether row `id` exists (committed read; retried on temporary errors). */
static bool exists(Ndb& ndb, const NdbDictionary::Table* t, Uint32 id) {
  for (int tries = 0; tries < MAX_TRIES; tries++) {
    NdbTransaction* tx = ndb.startTransaction();
    if (tx == NULL) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    NdbOperation* op = tx->getNdbOperation(t);
    op->readTuple(NdbOperation::LM_CommittedRead);
    op->equal("ID", id);
    NdbRecAttr* v = op->getValue("V");
    int rc = tx->execute(NdbTransaction::Commit);
    NdbError e = tx->getNdbError();
    bool right = rc == 0 && v->u_32_value() == id * 3;
    ndb.closeTransaction(tx);
    if (rc == 0) return right;
    if (e.code == 626) return false;
    if (e.status != NdbError::TemporaryError && e.code != 4012) APIERROR(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  printf("row %u: no answer after %d tries\n", id, MAX_TRIES);
  exit(-1);
}

static void insert(Ndb& ndb, const NdbDictionary::Table* t, Uint32 id) {
  for (int tries = 0; tries < MAX_TRIES; tries++) {
    NdbTransaction* tx = ndb.startTransaction();
    if (tx == NULL) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    NdbOperation* op = tx->getNdbOperation(t);
    op->insertTuple();
    op->equal("ID", id);
    op->setValue("V", id * 3);
    int rc = tx->execute(NdbTransaction::Commit);
    NdbError e = tx->getNdbError();
    ndb.closeTransaction(tx);
    if (rc == 0) return;
    if (e.code == 630 && tries > 0) return; /* an earlier try committed after all */
    if (e.code == 4012 && exists(ndb, t, id)) return;
    if (e.status != NdbError::TemporaryError && e.code != 4012) APIERROR(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  printf("row %u: not inserted after %d tries\n", id, MAX_TRIES);
  exit(-1);
}

int main(int argc, char** argv) {
  ndb_init();
  {
    Ndb_cluster_connection conn(argc > 1 ? argv[1] : "embedded");
    if (conn.connect(4, 5, 1) != 0 || conn.wait_until_ready(30, 0) < 0) {
      printf("Cluster connect failed: %s\n", conn.get_latest_error_msg());
      exit(-1);
    }
    Ndb ndb(&conn, "ndb_examples");
    if (ndb.init(1024) == -1) APIERROR(ndb.getNdbError());
    if (rndb_execute_sql(ndb, "CREATE TABLE api_failover (ID INT UNSIGNED NOT NULL PRIMARY KEY, "
                              "V INT UNSIGNED NOT NULL) ENGINE=NDB") < 0)
      APIERROR(ndb.getNdbError());
    const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_failover");
    if (t == NULL) APIERROR(ndb.getDictionary()->getNdbError());
    for (Uint32 id = 0; id < ROWS; id++) {
      insert(ndb, t, id);
      /* For the test that kills a data node meanwhile. */
      if (id == ROWS / 4) {
        fprintf(stderr, "progress %u\n", id);
        fflush(stderr);
      }
    }
    printf("inserted %u rows\n", ROWS);

    /* Every row, read back by a full scan (each once) and by key. */
    Uint32 scanned = 0, by_key = 0;
    for (int tries = 0; tries < MAX_TRIES; tries++) {
      NdbTransaction* tx = ndb.startTransaction();
      NdbScanOperation* scan = tx->getNdbScanOperation(t);
      scan->readTuples(NdbOperation::LM_CommittedRead);
      NdbRecAttr* v = scan->getValue("V");
      NdbRecAttr* id = scan->getValue("ID");
      scanned = 0;
      bool ok = tx->execute(NdbTransaction::NoCommit) == 0;
      int check = 0;
      while (ok && (check = scan->nextResult(true)) == 0) {
        if (v->u_32_value() != id->u_32_value() * 3) {
          printf("row %u has V=%u\n", id->u_32_value(), v->u_32_value());
          exit(-1);
        }
        scanned++;
      }
      NdbError e = tx->getNdbError();
      ndb.closeTransaction(tx);
      if (ok && check == 1) break;
      if (e.status != NdbError::TemporaryError) APIERROR(e);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (Uint32 i = 0; i < ROWS; i++) by_key += exists(ndb, t, i) ? 1 : 0;
    printf("scan: %u rows, by key: %u rows\n", scanned, by_key);
    if (ndb.getDictionary()->dropTable("api_failover") != 0)
      APIERROR(ndb.getDictionary()->getNdbError());
  }
  ndb_end(0);
  return 0;
}
