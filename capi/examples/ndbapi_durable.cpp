/*
 * ndbapi_durable.cpp: a durable commit and a system restart through the NDB API.
 *
 *   1. An embedded cluster with a data directory (a fresh one under /tmp): creates
 *      table api_durable, inserts a row, reads the commit's GCI (getGCI) and waits
 *      until that commit is on disk on every data node
 *      (Ndb_cluster_connection::wait_durable, an rndb extension: NDB API commits become
 *      durable at the next global checkpoint and cannot be waited for).
 *   2. A second connection to the same directory after the first closed: a system
 *      restart, after which the row is read back.
 */
#include <NdbApi.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#define PRINT_ERROR(code, msg) \
  printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, code, msg)
#define APIERROR(error)                        \
  {                                            \
    PRINT_ERROR((error).code, (error).message); \
    exit(-1);                                  \
  }

static void connect_or_exit(Ndb_cluster_connection& conn) {
  if (conn.connect(4, 5, 1) != 0) {
    printf("Unable to start the cluster: %s\n", conn.get_latest_error_msg());
    exit(-1);
  }
  if (conn.wait_until_ready(30, 0) < 0) {
    printf("Cluster was not ready within 30 secs.\n");
    exit(-1);
  }
}

int main() {
  ndb_init();
  char tmpl[] = "/tmp/rndb-durable-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (dir == NULL) {
    printf("mkdtemp failed\n");
    return 1;
  }
  const std::string connectstring = std::string("embedded;datadir=") + dir;
  {
    Ndb_cluster_connection conn(connectstring.c_str());
    connect_or_exit(conn);
    Ndb ndb(&conn, "ndb_examples");
    if (ndb.init()) APIERROR(ndb.getNdbError());
    if (rndb_execute_sql(ndb,
                         "CREATE TABLE api_durable (ATTR1 INT UNSIGNED NOT NULL PRIMARY KEY, "
                         "ATTR2 INT UNSIGNED NOT NULL) ENGINE=NDB") < 0)
      APIERROR(ndb.getNdbError());
    const NdbDictionary::Table* table = ndb.getDictionary()->getTable("api_durable");
    if (table == NULL) APIERROR(ndb.getDictionary()->getNdbError());

    NdbTransaction* trans = ndb.startTransaction();
    if (trans == NULL) APIERROR(ndb.getNdbError());
    NdbOperation* op = trans->getNdbOperation(table);
    if (op == NULL) APIERROR(trans->getNdbError());
    op->insertTuple();
    op->equal("ATTR1", (Uint32)1);
    op->setValue("ATTR2", (Uint32)42);
    if (trans->execute(NdbTransaction::Commit) == -1) APIERROR(trans->getNdbError());
    Uint64 gci = 0;
    if (trans->getGCI(&gci) != 0) APIERROR(trans->getNdbError());
    printf("committed in global checkpoint %s\n", (gci >> 32) > 0 ? "n (known)" : "0 (missing)");
    ndb.closeTransaction(trans);

    if (conn.wait_durable(gci, 30000) != 0) {
      printf("not durable: %s\n", conn.get_latest_error_msg());
      return 1;
    }
    printf("durable on every data node\n");
  }
  {
    // The same data directory: a system restart recovers the table and its row.
    Ndb_cluster_connection conn(connectstring.c_str());
    connect_or_exit(conn);
    Ndb ndb(&conn, "ndb_examples");
    if (ndb.init()) APIERROR(ndb.getNdbError());
    const NdbDictionary::Table* table = ndb.getDictionary()->getTable("api_durable");
    if (table == NULL) APIERROR(ndb.getDictionary()->getNdbError());
    NdbTransaction* trans = ndb.startTransaction();
    if (trans == NULL) APIERROR(ndb.getNdbError());
    NdbOperation* op = trans->getNdbOperation(table);
    if (op == NULL) APIERROR(trans->getNdbError());
    op->readTuple(NdbOperation::LM_Read);
    op->equal("ATTR1", (Uint32)1);
    NdbRecAttr* attr2 = op->getValue("ATTR2", NULL);
    if (attr2 == NULL) APIERROR(trans->getNdbError());
    if (trans->execute(NdbTransaction::Commit) == -1) APIERROR(trans->getNdbError());
    printf("after the system restart: ATTR1 1 ATTR2 %u\n", attr2->u_32_value());
    ndb.closeTransaction(trans);
  }
  std::filesystem::remove_all(dir);
  ndb_end(0);
  return 0;
}
