/*
 * ndbapi_simple.cpp: synchronous transactions, as NDB's ndbapi_simple example.
 *
 * Creates table api_simple (ATTR1 INT UNSIGNED key, ATTR2 INT UNSIGNED), then
 *   1. inserts 10 rows (two per transaction),
 *   2. updates the even rows (ATTR2 = ATTR1 + 10),
 *   3. deletes row 3,
 *   4. reads the 10 keys back and prints the table.
 * The only changes from the NDB API original: the include, the connectstring
 * ("embedded" runs the cluster in this process) and the CREATE TABLE, run through
 * rndb_execute_sql since there is no mysqld.
 */
#include <NdbApi.hpp>

#include <cstdio>
#include <cstdlib>

#define PRINT_ERROR(code, msg) \
  printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, code, msg)
#define APIERROR(error)                        \
  {                                            \
    PRINT_ERROR((error).code, (error).message); \
    exit(-1);                                  \
  }

static void do_insert(Ndb& myNdb) {
  const NdbDictionary::Dictionary* myDict = myNdb.getDictionary();
  const NdbDictionary::Table* myTable = myDict->getTable("api_simple");
  if (myTable == NULL) APIERROR(myDict->getNdbError());

  for (int i = 0; i < 5; i++) {
    NdbTransaction* myTransaction = myNdb.startTransaction();
    if (myTransaction == NULL) APIERROR(myNdb.getNdbError());

    NdbOperation* myOperation = myTransaction->getNdbOperation(myTable);
    if (myOperation == NULL) APIERROR(myTransaction->getNdbError());
    myOperation->insertTuple();
    myOperation->equal("ATTR1", (Uint32)i);
    myOperation->setValue("ATTR2", (Uint32)i);

    myOperation = myTransaction->getNdbOperation(myTable);
    if (myOperation == NULL) APIERROR(myTransaction->getNdbError());
    myOperation->insertTuple();
    myOperation->equal("ATTR1", (Uint32)(i + 5));
    myOperation->setValue("ATTR2", (Uint32)(i + 5));

    if (myTransaction->execute(NdbTransaction::Commit) == -1)
      APIERROR(myTransaction->getNdbError());
    myNdb.closeTransaction(myTransaction);
  }
}

static void do_update(Ndb& myNdb) {
  const NdbDictionary::Dictionary* myDict = myNdb.getDictionary();
  const NdbDictionary::Table* myTable = myDict->getTable("api_simple");
  if (myTable == NULL) APIERROR(myDict->getNdbError());

  for (int i = 0; i < 10; i += 2) {
    NdbTransaction* myTransaction = myNdb.startTransaction();
    if (myTransaction == NULL) APIERROR(myNdb.getNdbError());
    NdbOperation* myOperation = myTransaction->getNdbOperation(myTable);
    if (myOperation == NULL) APIERROR(myTransaction->getNdbError());
    myOperation->updateTuple();
    myOperation->equal("ATTR1", (Uint32)i);
    myOperation->setValue("ATTR2", (Uint32)(i + 10));
    if (myTransaction->execute(NdbTransaction::Commit) == -1)
      APIERROR(myTransaction->getNdbError());
    myNdb.closeTransaction(myTransaction);
  }
}

static void do_delete(Ndb& myNdb) {
  const NdbDictionary::Dictionary* myDict = myNdb.getDictionary();
  const NdbDictionary::Table* myTable = myDict->getTable("api_simple");
  if (myTable == NULL) APIERROR(myDict->getNdbError());

  NdbTransaction* myTransaction = myNdb.startTransaction();
  if (myTransaction == NULL) APIERROR(myNdb.getNdbError());
  NdbOperation* myOperation = myTransaction->getNdbOperation(myTable);
  if (myOperation == NULL) APIERROR(myTransaction->getNdbError());
  myOperation->deleteTuple();
  myOperation->equal("ATTR1", (Uint32)3);
  if (myTransaction->execute(NdbTransaction::Commit) == -1)
    APIERROR(myTransaction->getNdbError());
  myNdb.closeTransaction(myTransaction);
}

static void do_read(Ndb& myNdb) {
  const NdbDictionary::Dictionary* myDict = myNdb.getDictionary();
  const NdbDictionary::Table* myTable = myDict->getTable("api_simple");
  if (myTable == NULL) APIERROR(myDict->getNdbError());

  printf("ATTR1 ATTR2\n");
  for (int i = 0; i < 10; i++) {
    NdbTransaction* myTransaction = myNdb.startTransaction();
    if (myTransaction == NULL) APIERROR(myNdb.getNdbError());
    NdbOperation* myOperation = myTransaction->getNdbOperation(myTable);
    if (myOperation == NULL) APIERROR(myTransaction->getNdbError());
    myOperation->readTuple(NdbOperation::LM_Read);
    myOperation->equal("ATTR1", (Uint32)i);
    NdbRecAttr* myRecAttr = myOperation->getValue("ATTR2", NULL);
    if (myRecAttr == NULL) APIERROR(myTransaction->getNdbError());

    if (myTransaction->execute(NdbTransaction::Commit) == -1) {
      if (i == 3) {
        printf("Detected that deleted tuple doesn't exist!\n");
      } else {
        APIERROR(myTransaction->getNdbError());
      }
    }
    if (i != 3) printf(" %2d    %2d\n", i, myRecAttr->u_32_value());
    myNdb.closeTransaction(myTransaction);
  }
}

int main(int argc, char** argv) {
  ndb_init();
  const char* connectstring = argc > 1 ? argv[1] : "embedded";
  {
    Ndb_cluster_connection cluster_connection(connectstring);
    if (cluster_connection.connect(4, 5, 1)) {
      printf("Unable to connect to cluster within 30 secs.\n");
      exit(-1);
    }
    if (cluster_connection.wait_until_ready(30, 0) < 0) {
      printf("Cluster was not ready within 30 secs.\n");
      exit(-1);
    }
    Ndb myNdb(&cluster_connection, "ndb_examples");
    if (myNdb.init()) APIERROR(myNdb.getNdbError());

    if (rndb_execute_sql(myNdb,
                         "CREATE TABLE api_simple (ATTR1 INT UNSIGNED NOT NULL PRIMARY KEY, "
                         "ATTR2 INT UNSIGNED NOT NULL) ENGINE=NDB") < 0)
      APIERROR(myNdb.getNdbError());

    do_insert(myNdb);
    do_update(myNdb);
    do_delete(myNdb);
    do_read(myNdb);
  }
  ndb_end(0);
  return 0;
}
