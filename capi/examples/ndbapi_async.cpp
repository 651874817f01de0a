/*
 * ndbapi_async.cpp: asynchronous transactions, as NDB's ndbapi_async1 example:
 * transactions are defined, prepared with executeAsynchPrepare (nothing is sent), then
 * sent and completed together by Ndb::sendPollNdb, which runs each one's callback.
 *
 * Inserts 10 rows in 10 parallel transactions, then reads them back in 10 parallel
 * committed-read transactions (values land in the buffers given to getValue), then
 * shows a failing transaction in a batch (a duplicate key: result -1, error 630).
 */
#include <NdbApi.hpp>

#include <cstdio>
#include <cstdlib>

#define APIERROR(error)                                                                  \
  {                                                                                      \
    printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, (error).code, \
           (error).message);                                                             \
    exit(-1);                                                                            \
  }

static const int PARALLEL = 10;

struct Slot {
  int id;
  NdbTransaction* tx;
  Uint32 value;
};

static int completed = 0;

static void callback(int result, NdbTransaction* tx, void* arg) {
  Slot* s = static_cast<Slot*>(arg);
  completed++;
  if (result == -1) {
    const NdbError& e = tx->getNdbError();
    printf("  transaction %d failed: error %d (%s), %s\n", s->id, e.code, e.message,
           e.status == NdbError::TemporaryError ? "temporary" : "permanent");
  } else {
    printf("  transaction %d completed\n", s->id);
  }
}

static void insert_batch(Ndb& ndb, const NdbDictionary::Table* t, Slot* slots, int first, int n) {
  for (int i = 0; i < n; i++) {
    Slot& s = slots[i];
    s.id = first + i;
    s.tx = ndb.startTransaction();
    if (s.tx == NULL) APIERROR(ndb.getNdbError());
    NdbOperation* op = s.tx->getNdbOperation(t);
    op->insertTuple();
    op->equal("ATTR1", (Uint32)s.id);
    op->setValue("ATTR2", (Uint32)(s.id * 100));
    if (s.tx->executeAsynchPrepare(NdbTransaction::Commit, &callback, &s) != 0)
      APIERROR(s.tx->getNdbError());
  }
  completed = 0;
  int done = ndb.sendPollNdb(3000, n);
  while (done < n) done += ndb.pollNdb(3000, n - done);
  printf("  sendPollNdb: %d of %d transactions completed (%d callbacks)\n", done, n, completed);
  for (int i = 0; i < n; i++) ndb.closeTransaction(slots[i].tx);
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
    if (rndb_execute_sql(ndb, "CREATE TABLE api_async (ATTR1 INT UNSIGNED NOT NULL PRIMARY KEY, "
                              "ATTR2 INT UNSIGNED NOT NULL) ENGINE=NDB") < 0)
      APIERROR(ndb.getNdbError());
    const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_async");
    if (t == NULL) APIERROR(ndb.getDictionary()->getNdbError());

    Slot slots[PARALLEL];
    printf("Inserting %d rows in %d parallel transactions:\n", PARALLEL, PARALLEL);
    insert_batch(ndb, t, slots, 0, PARALLEL);

    printf("Reading them back in %d parallel transactions:\n", PARALLEL);
    for (int i = 0; i < PARALLEL; i++) {
      Slot& s = slots[i];
      s.id = i;
      s.value = 0;
      s.tx = ndb.startTransaction();
      NdbOperation* op = s.tx->getNdbOperation(t);
      op->readTuple(NdbOperation::LM_CommittedRead);
      op->equal("ATTR1", (Uint32)i);
      op->getValue("ATTR2", (char*)&s.value);
      s.tx->executeAsynchPrepare(NdbTransaction::Commit, &callback, &s);
    }
    int done = ndb.sendPollNdb();
    printf("  sendPollNdb: %d completed\n", done);
    for (int i = 0; i < PARALLEL; i++) {
      printf("  ATTR1=%d ATTR2=%u\n", slots[i].id, slots[i].value);
      ndb.closeTransaction(slots[i].tx);
    }

    printf("A batch with a duplicate key (rows 8..11):\n");
    insert_batch(ndb, t, slots, 8, 4);
  }
  ndb_end(0);
  return 0;
}
