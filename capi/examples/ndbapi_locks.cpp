/*
 * ndbapi_locks.cpp: row locks between transactions, rounds of one transaction, and a
 * locking scan, as an NDB API program sees them. The same output on the embedded
 * cluster and against rndb_mgmd (the connectstring is the first argument; the lock
 * waits need TransactionDeadlockDetectionTimeout=300 to be quick).
 *
 * Table api_locks (ID INT UNSIGNED key, V INT UNSIGNED) with a unique hash index UV on
 * V, made through the dictionary API. Then:
 *   1. an exclusive read in a NoCommit round holds the row: another transaction's
 *      update of it waits and gets 266 (temporary: retry), a committed read of it
 *      sees the last committed value; the holder then updates and commits;
 *   2. rounds that are rolled back leave nothing (an insert and an update);
 *   3. a locking scan (LM_Exclusive) adds 1 to V of every row through
 *      updateCurrentTuple; until it commits, a committed read sees the old values;
 *   4. the unique index is found by its name.
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

static const NdbDictionary::Table* create(Ndb& ndb) {
  NdbDictionary::Dictionary* dict = ndb.getDictionary();
  NdbDictionary::Table t("api_locks");
  NdbDictionary::Column id("ID");
  id.setType(NdbDictionary::Column::Unsigned);
  id.setPrimaryKey(true);
  t.addColumn(id);
  NdbDictionary::Column v("V");
  v.setType(NdbDictionary::Column::Unsigned);
  t.addColumn(v);
  if (dict->createTable(t) != 0) APIERROR(dict->getNdbError());
  NdbDictionary::Index uv("UV");
  uv.setTable("api_locks");
  uv.setType(NdbDictionary::Index::UniqueHashIndex);
  uv.addColumnName("V");
  if (dict->createIndex(uv) != 0) APIERROR(dict->getNdbError());
  const NdbDictionary::Table* table = dict->getTable("api_locks");
  if (table == NULL) APIERROR(dict->getNdbError());
  return table;
}

/* V of row `id` by a committed read in a transaction of its own (-1: no row). */
static long committed_v(Ndb& ndb, const NdbDictionary::Table* t, Uint32 id) {
  NdbTransaction* tx = ndb.startTransaction();
  if (tx == NULL) APIERROR(ndb.getNdbError());
  NdbOperation* op = tx->getNdbOperation(t);
  op->readTuple(NdbOperation::LM_CommittedRead);
  op->equal("ID", id);
  NdbRecAttr* v = op->getValue("V");
  long out = -1;
  if (tx->execute(NdbTransaction::Commit) == 0)
    out = v->u_32_value();
  else if (tx->getNdbError().code != 626)
    APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
  return out;
}

static void print_rows(Ndb& ndb, const NdbDictionary::Table* t, const char* when) {
  printf("%s:", when);
  for (Uint32 id = 0; id < 6; id++) {
    long v = committed_v(ndb, t, id);
    if (v < 0)
      printf(" %u=none", id);
    else
      printf(" %u=%ld", id, v);
  }
  printf("\n");
}

static void lock_wait(Ndb& ndb, const NdbDictionary::Table* t) {
  NdbTransaction* holder = ndb.startTransaction();
  NdbOperation* op = holder->getNdbOperation(t);
  op->readTuple(NdbOperation::LM_Exclusive);
  op->equal("ID", (Uint32)2);
  NdbRecAttr* v = op->getValue("V");
  if (holder->execute(NdbTransaction::NoCommit) != 0) APIERROR(holder->getNdbError());
  printf("holder read ID 2 exclusively: V=%u\n", v->u_32_value());

  NdbTransaction* other = ndb.startTransaction();
  NdbOperation* up = other->getNdbOperation(t);
  up->updateTuple();
  up->equal("ID", (Uint32)2);
  up->setValue("V", (Uint32)99);
  int rc = other->execute(NdbTransaction::Commit);
  const NdbError& e = other->getNdbError();
  printf("other's update of ID 2: rc=%d code=%d temporary=%d\n", rc, e.code,
         e.status == NdbError::TemporaryError);
  ndb.closeTransaction(other);
  printf("committed read of ID 2 meanwhile: V=%ld\n", committed_v(ndb, t, 2));

  NdbOperation* mine = holder->getNdbOperation(t);
  mine->updateTuple();
  mine->equal("ID", (Uint32)2);
  mine->setValue("V", (Uint32)21);
  if (holder->execute(NdbTransaction::Commit) != 0) APIERROR(holder->getNdbError());
  ndb.closeTransaction(holder);
}

static void rolled_back(Ndb& ndb, const NdbDictionary::Table* t) {
  NdbTransaction* tx = ndb.startTransaction();
  NdbOperation* ins = tx->getNdbOperation(t);
  ins->insertTuple();
  ins->equal("ID", (Uint32)5);
  ins->setValue("V", (Uint32)50);
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  NdbOperation* up = tx->getNdbOperation(t);
  up->updateTuple();
  up->equal("ID", (Uint32)0);
  up->setValue("V", (Uint32)1000);
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  NdbOperation* rd = tx->getNdbOperation(t);
  rd->readTuple(NdbOperation::LM_Read);
  rd->equal("ID", (Uint32)5);
  NdbRecAttr* v = rd->getValue("V");
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  printf("inside the transaction ID 5 has V=%u\n", v->u_32_value());
  if (tx->execute(NdbTransaction::Rollback) != 0) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
}

static void scan_update(Ndb& ndb, const NdbDictionary::Table* t) {
  NdbTransaction* tx = ndb.startTransaction();
  NdbScanOperation* scan = tx->getNdbScanOperation(t);
  if (scan->readTuples(NdbOperation::LM_Exclusive) != 0) APIERROR(tx->getNdbError());
  NdbRecAttr* v = scan->getValue("V");
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  int updated = 0, check;
  while ((check = scan->nextResult(true)) == 0) {
    do {
      NdbOperation* op = scan->updateCurrentTuple();
      if (op == NULL || op->setValue("V", (Uint32)(v->u_32_value() + 1)) != 0)
        APIERROR(tx->getNdbError());
      updated++;
    } while ((check = scan->nextResult(false)) == 0);
    if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  }
  if (check == -1) APIERROR(tx->getNdbError());
  printf("scan updated %d rows; before the commit ID 4 has V=%ld\n", updated,
         committed_v(ndb, t, 4));
  if (tx->execute(NdbTransaction::Commit) != 0) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
}

int main(int argc, char** argv) {
  ndb_init();
  {
    Ndb_cluster_connection conn(argc > 1 ? argv[1]
                                         : "embedded;TransactionDeadlockDetectionTimeout=300");
    if (conn.connect(4, 5, 1) != 0 || conn.wait_until_ready(30, 0) < 0) {
      printf("Cluster connect failed: %s\n", conn.get_latest_error_msg());
      exit(-1);
    }
    Ndb ndb(&conn, "ndb_examples");
    if (ndb.init(1024) == -1) APIERROR(ndb.getNdbError());
    const NdbDictionary::Table* t = create(ndb);

    NdbTransaction* tx = ndb.startTransaction();
    for (Uint32 id = 0; id < 5; id++) {
      NdbOperation* op = tx->getNdbOperation(t);
      op->insertTuple();
      op->equal("ID", id);
      op->setValue("V", id * 10);
    }
    if (tx->execute(NdbTransaction::Commit) != 0) APIERROR(tx->getNdbError());
    ndb.closeTransaction(tx);
    print_rows(ndb, t, "loaded");

    lock_wait(ndb, t);
    print_rows(ndb, t, "after the holder's commit");
    rolled_back(ndb, t);
    print_rows(ndb, t, "after the rollback");
    scan_update(ndb, t);
    print_rows(ndb, t, "after the scan's commit");

    const NdbDictionary::Index* uv = ndb.getDictionary()->getIndex("UV", "api_locks");
    if (uv == NULL) APIERROR(ndb.getDictionary()->getNdbError());
    printf("index UV: unique hash index %d\n",
           uv->getType() == NdbDictionary::Index::UniqueHashIndex);
    if (ndb.getDictionary()->dropTable("api_locks") != 0)
      APIERROR(ndb.getDictionary()->getNdbError());
  }
  ndb_end(0);
  return 0;
}
