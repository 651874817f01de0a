/*
 * ndbapi_retries.cpp: retrying a transaction on temporary errors, as NDB's
 * ndbapi_retries example. A temporary error (NdbError::TemporaryError: lock wait
 * timeout 266, out of operation records 233, node failure ...) means the transaction
 * was aborted and may succeed if run again; a permanent one does not.
 *
 * Here another transaction holds a lock on the row (an update executed with NoCommit),
 * so the first attempt waits TransactionDeadlockDetectionTimeout and fails with 266;
 * the holder then commits and the retry succeeds. Run with a short timeout:
 *   ndbapi_retries "embedded;TransactionDeadlockDetectionTimeout=300"
 */
#include <NdbApi.hpp>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#define APIERROR(error)                                                                  \
  {                                                                                      \
    printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, (error).code, \
           (error).message);                                                             \
    exit(-1);                                                                            \
  }

static NdbTransaction* holder = NULL;

/* What the other party does between our attempts: finish its transaction. */
static void other_party_finishes(Ndb& ndb) {
  if (holder != NULL) {
    if (holder->execute(NdbTransaction::Commit) != 0) APIERROR(holder->getNdbError());
    ndb.closeTransaction(holder);
    holder = NULL;
    printf("  (the lock holder committed)\n");
  }
}

/* ATTR2 = value for ATTR1 = key, with up to 10 attempts. Returns 0 or -1. */
static int update_with_retries(Ndb& ndb, const NdbDictionary::Table* t, Uint32 key, Uint32 value) {
  const int retries = 10;
  for (int attempt = 1; attempt <= retries; attempt++) {
    NdbTransaction* tx = ndb.startTransaction();
    if (tx == NULL) {
      const NdbError& e = ndb.getNdbError();
      if (e.status == NdbError::TemporaryError) {
        usleep(50 * 1000);
        continue;
      }
      APIERROR(e);
    }
    NdbOperation* op = tx->getNdbOperation(t);
    op->updateTuple();
    op->equal("ATTR1", key);
    op->setValue("ATTR2", value);
    if (tx->execute(NdbTransaction::Commit) == 0) {
      printf("  attempt %d: committed\n", attempt);
      ndb.closeTransaction(tx);
      return 0;
    }
    const NdbError err = tx->getNdbError();
    ndb.closeTransaction(tx);
    if (err.status != NdbError::TemporaryError) {
      printf("  attempt %d: permanent error %d: %s\n", attempt, err.code, err.message);
      return -1;
    }
    printf("  attempt %d: temporary error %d (%s), classification %d: retrying\n", attempt,
           err.code, err.message, (int)err.classification);
    other_party_finishes(ndb);
    usleep(10 * 1000);
  }
  return -1;
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
    if (ndb.init(16) == -1) APIERROR(ndb.getNdbError());
    if (rndb_execute_sql(ndb, "CREATE TABLE api_retries (ATTR1 INT UNSIGNED NOT NULL PRIMARY KEY, "
                              "ATTR2 INT UNSIGNED NOT NULL) ENGINE=NDB;"
                              "INSERT INTO api_retries VALUES (1, 10), (2, 20)") < 0)
      APIERROR(ndb.getNdbError());
    const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_retries");

    printf("Another transaction locks row 1 (update, NoCommit)\n");
    holder = ndb.startTransaction();
    NdbOperation* op = holder->getNdbOperation(t);
    op->updateTuple();
    op->equal("ATTR1", (Uint32)1);
    op->setValue("ATTR2", (Uint32)11);
    if (holder->execute(NdbTransaction::NoCommit) != 0) APIERROR(holder->getNdbError());

    printf("Updating row 1 with retries:\n");
    if (update_with_retries(ndb, t, 1, 12) != 0) printf("  gave up\n");
    printf("Updating row 3 (no such row) with retries:\n");
    if (update_with_retries(ndb, t, 3, 30) != 0) printf("  gave up\n");

    std::string out;
    rndb_execute_sql(ndb, "SELECT * FROM api_retries ORDER BY ATTR1", &out);
    printf("%s\n", out.c_str());
  }
  ndb_end(0);
  return 0;
}
