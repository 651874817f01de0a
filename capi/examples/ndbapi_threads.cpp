/*
 * ndbapi_threads.cpp: one cluster connection shared by threads, one Ndb object per
 * thread (NDB's rule). Each thread inserts 2048 rows of its own in asynchronous batches
 * of 32 transactions, reads them back (NdbRecAttr), updates half of them
 * synchronously, and checks what it reads.
 */
#include <NdbApi.hpp>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

static const int THREADS = 4, ROWS = 2048, BATCH = 32;

struct Result {
  int inserted = 0, read = 0, updated = 0, wrong = 0, failed = 0;
};

static void on_done(int result, NdbTransaction*, void* arg) {
  if (result != 0) static_cast<Result*>(arg)->failed++;
}

static void worker(Ndb_cluster_connection* conn, int t, Result* r) {
  Ndb ndb(conn, "ndb_examples");
  if (ndb.init(BATCH) != 0) {
    r->failed++;
    return;
  }
  const NdbDictionary::Table* tab = ndb.getDictionary()->getTable("api_threads");
  if (tab == NULL) {
    r->failed++;
    return;
  }
  for (int phase = 0; phase < 2; phase++) {
    for (int i = 0; i < ROWS; i += BATCH) {
      NdbTransaction* tx[BATCH];
      Uint32 values[BATCH];
      for (int j = 0; j < BATCH; j++) {
        Uint32 id = (Uint32)(t * ROWS + i + j);
        tx[j] = ndb.startTransaction();
        NdbOperation* op = tx[j]->getNdbOperation(tab);
        if (phase == 0) {
          op->insertTuple();
          op->equal("ID", id);
          op->setValue("V", id * 3);
        } else {
          op->readTuple(NdbOperation::LM_CommittedRead);
          op->equal("ID", id);
          op->getValue("V", (char*)&values[j]);
        }
        tx[j]->executeAsynchPrepare(NdbTransaction::Commit, &on_done, r);
      }
      if (ndb.sendPollNdb(3000, BATCH) != BATCH) r->failed++;
      for (int j = 0; j < BATCH; j++) {
        if (phase == 0) {
          r->inserted++;
        } else {
          r->read++;
          if (values[j] != (Uint32)(t * ROWS + i + j) * 3) r->wrong++;
        }
        ndb.closeTransaction(tx[j]);
      }
    }
  }
  for (int i = 0; i < ROWS; i += 2) {
    NdbTransaction* tx = ndb.startTransaction();
    NdbOperation* op = tx->getNdbOperation(tab);
    op->updateTuple();
    op->equal("ID", (Uint32)(t * ROWS + i));
    op->setValue("V", (Uint32)0);
    if (tx->execute(NdbTransaction::Commit) == 0)
      r->updated++;
    else
      r->failed++;
    ndb.closeTransaction(tx);
  }
}

int main(int argc, char** argv) {
  ndb_init();
  {
    Ndb_cluster_connection conn(argc > 1 ? argv[1] : "embedded");
    if (conn.connect(4, 5, 1) != 0) {
      printf("connect failed: %s\n", conn.get_latest_error_msg());
      return 1;
    }
    {
      Ndb ndb(&conn, "ndb_examples");
      ndb.init();
      if (rndb_execute_sql(ndb, "CREATE TABLE api_threads (ID INT UNSIGNED NOT NULL PRIMARY KEY, "
                                "V INT UNSIGNED NOT NULL)") < 0) {
        printf("CREATE TABLE failed: %s\n", ndb.getNdbError().message);
        return 1;
      }
    }
    std::vector<Result> results(THREADS);
    std::vector<std::thread> threads;
    for (int t = 0; t < THREADS; t++) threads.emplace_back(worker, &conn, t, &results[t]);
    for (size_t t = 0; t < threads.size(); t++) threads[t].join();
    for (int t = 0; t < THREADS; t++)
      printf("thread %d: %d inserted, %d read back (%d wrong), %d updated, %d failed\n", t,
             results[t].inserted, results[t].read, results[t].wrong, results[t].updated,
             results[t].failed);
    Ndb ndb(&conn, "ndb_examples");
    std::string out;
    rndb_execute_sql(ndb, "SELECT COUNT(*), SUM(V = 0) FROM api_threads", &out);
    printf("%s\n", out.c_str());
  }
  ndb_end(0);
  return 0;
}
