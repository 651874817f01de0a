/*
 * ndbapi_index_scan.cpp: ordered-index range scans with NdbIndexScanOperation.
 *
 * Table api_idx (ID INT UNSIGNED key, K INT UNSIGNED, NAME VARCHAR(32)) with an ordered
 * index IX_K on K, made through the dictionary API. 20 rows, K = (ID * 7) % 20 * 5.
 * Scans: 10 <= K < 40 ascending (BoundLE 10, BoundGT 40, SF_OrderBy), the same range
 * descending, K = 45 (BoundEQ), and K > 80 with no upper bound (BoundLT).
 */
#include <NdbApi.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define APIERROR(error)                                                                  \
  {                                                                                      \
    printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, (error).code, \
           (error).message);                                                             \
    exit(-1);                                                                            \
  }

static void create(Ndb& ndb) {
  NdbDictionary::Dictionary* dict = ndb.getDictionary();
  NdbDictionary::Table t("api_idx");
  NdbDictionary::Column id("ID");
  id.setType(NdbDictionary::Column::Unsigned);
  id.setPrimaryKey(true);
  t.addColumn(id);
  NdbDictionary::Column k("K");
  k.setType(NdbDictionary::Column::Unsigned);
  t.addColumn(k);
  NdbDictionary::Column name("NAME");
  name.setType(NdbDictionary::Column::Varchar);
  name.setLength(32);
  name.setNullable(true);
  t.addColumn(name);
  if (dict->createTable(t) != 0) APIERROR(dict->getNdbError());

  NdbDictionary::Index ix("IX_K");
  ix.setTable("api_idx");
  ix.setType(NdbDictionary::Index::OrderedIndex);
  ix.setLogging(false);
  ix.addColumnName("K");
  if (dict->createIndex(ix) != 0) APIERROR(dict->getNdbError());
}

static void load(Ndb& ndb) {
  const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_idx");
  NdbTransaction* tx = ndb.startTransaction();
  for (Uint32 i = 0; i < 20; i++) {
    NdbOperation* op = tx->getNdbOperation(t);
    op->insertTuple();
    op->equal("ID", i);
    op->setValue("K", (Uint32)((i * 7) % 20 * 5));
    char name[33];
    int n = snprintf(name + 1, sizeof name - 1, "row-%u", i);
    name[0] = (char)n;
    op->setValue("NAME", i % 4 == 3 ? NULL : name);
  }
  if (tx->execute(NdbTransaction::Commit) != 0) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
}

struct Bound {
  int type;
  Uint32 value;
};

static void range(Ndb& ndb, const char* title, const Bound* bounds, int nbounds, Uint32 flags) {
  const NdbDictionary::Index* ix = ndb.getDictionary()->getIndex("IX_K", "api_idx");
  if (ix == NULL) APIERROR(ndb.getDictionary()->getNdbError());
  NdbTransaction* tx = ndb.startTransaction();
  NdbIndexScanOperation* scan = tx->getNdbIndexScanOperation(ix);
  if (scan == NULL) APIERROR(tx->getNdbError());
  if (scan->readTuples(NdbOperation::LM_CommittedRead, flags) != 0) APIERROR(tx->getNdbError());
  for (int b = 0; b < nbounds; b++)
    if (scan->setBound("K", bounds[b].type, &bounds[b].value) != 0) APIERROR(tx->getNdbError());
  NdbRecAttr* k = scan->getValue("K");
  NdbRecAttr* id = scan->getValue("ID");
  NdbRecAttr* name = scan->getValue("NAME");
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  printf("%s (sorted=%d descending=%d):\n", title, scan->getSorted(), scan->getDescending());
  int rc, rows = 0;
  while ((rc = scan->nextResult(true)) == 0) {
    if (name->isNULL())
      printf("  K=%2u ID=%2u NAME=NULL\n", k->u_32_value(), id->u_32_value());
    else
      printf("  K=%2u ID=%2u NAME=%.*s\n", k->u_32_value(), id->u_32_value(),
             (int)(unsigned char)name->aRef()[0], name->aRef() + 1);
    rows++;
  }
  if (rc == -1) APIERROR(tx->getNdbError());
  printf("  %d rows\n", rows);
  ndb.closeTransaction(tx);
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
    create(ndb);
    load(ndb);
    const Bound asc[] = {{NdbIndexScanOperation::BoundLE, 10}, {NdbIndexScanOperation::BoundGT, 40}};
    range(ndb, "10 <= K < 40", asc, 2, NdbScanOperation::SF_OrderBy);
    range(ndb, "10 <= K < 40 descending", asc, 2,
          NdbScanOperation::SF_OrderBy | NdbScanOperation::SF_Descending);
    const Bound eq[] = {{NdbIndexScanOperation::BoundEQ, 45}};
    range(ndb, "K = 45", eq, 1, NdbScanOperation::SF_OrderBy);
    const Bound gt[] = {{NdbIndexScanOperation::BoundLT, 80}};
    range(ndb, "K > 80", gt, 1, NdbScanOperation::SF_OrderBy);
  }
  ndb_end(0);
  return 0;
}
