/*
 * ndbapi_disk.cpp: a disk-data table through the NDB API.
 *
 * Creates logfile group lg and tablespace ts_1 (SQL through rndb_execute_sql: there is
 * no mysqld), then table api_disk with NdbDictionary: key ID in memory, V and W on disk
 * (setStorageType(StorageTypeDisk), setTablespaceName("ts_1")), then
 *   1. inserts 100 rows (ten per transaction),
 *   2. doubles W of the even rows,
 *   3. deletes the rows 90..99,
 *   4. reads ten keys back and prints them,
 *   5. shows that an index on a disk column is refused (NDB error 756),
 * and prints the tablespace's extents from information_schema.FILES.
 */
#include <NdbApi.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#define APIERROR(error)                                                                  \
  {                                                                                      \
    printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, (error).code, \
           (error).message);                                                             \
    exit(-1);                                                                            \
  }

static void run_sql(Ndb& ndb, const char* sql, bool show) {
  std::string out;
  if (rndb_execute_sql(ndb, sql, &out) < 0) APIERROR(ndb.getNdbError());
  if (!show) return;
  // The result table only (the mysql client's timing line varies).
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(at, end - at);
    if (!line.empty() && (line[0] == '|' || line[0] == '+')) printf("%s\n", line.c_str());
    at = end + 1;
  }
}

static void write_rows(Ndb& ndb, const NdbDictionary::Table* t) {
  for (Uint32 first = 0; first < 100; first += 10) {
    NdbTransaction* tx = ndb.startTransaction();
    if (tx == NULL) APIERROR(ndb.getNdbError());
    for (Uint32 i = first; i < first + 10; i++) {
      NdbOperation* op = tx->getNdbOperation(t);
      if (op == NULL) APIERROR(tx->getNdbError());
      op->insertTuple();
      op->equal("ID", i);
      op->setValue("V", (Uint64)i * 1000);
      op->setValue("W", (Uint32)i);
    }
    if (tx->execute(NdbTransaction::Commit) == -1) APIERROR(tx->getNdbError());
    ndb.closeTransaction(tx);
  }
  NdbTransaction* tx = ndb.startTransaction();
  for (Uint32 i = 0; i < 100; i += 2) {
    NdbOperation* op = tx->getNdbOperation(t);
    op->updateTuple();
    op->equal("ID", i);
    op->setValue("W", (Uint32)(2 * i));
  }
  if (tx->execute(NdbTransaction::Commit) == -1) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
  tx = ndb.startTransaction();
  for (Uint32 i = 90; i < 100; i++) {
    NdbOperation* op = tx->getNdbOperation(t);
    op->deleteTuple();
    op->equal("ID", i);
  }
  if (tx->execute(NdbTransaction::Commit) == -1) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
}

static void read_rows(Ndb& ndb, const NdbDictionary::Table* t) {
  printf(" ID        V    W\n");
  for (Uint32 i = 0; i < 100; i += 11) {
    NdbTransaction* tx = ndb.startTransaction();
    NdbOperation* op = tx->getNdbOperation(t);
    op->readTuple(NdbOperation::LM_CommittedRead);
    op->equal("ID", i);
    NdbRecAttr* v = op->getValue("V", NULL);
    NdbRecAttr* w = op->getValue("W", NULL);
    if (tx->execute(NdbTransaction::Commit) == -1) {
      printf("%3u  error %d: %s\n", i, tx->getNdbError().code, tx->getNdbError().message);
    } else {
      printf("%3u %8llu %4u\n", i, (unsigned long long)v->u_64_value(), w->u_32_value());
    }
    ndb.closeTransaction(tx);
  }
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
    if (ndb.init(64) != 0) APIERROR(ndb.getNdbError());
    run_sql(ndb,
            "CREATE LOGFILE GROUP lg ADD UNDOFILE 'undo1.dat' INITIAL_SIZE=4M "
            "UNDO_BUFFER_SIZE=1M ENGINE=NDB",
            false);
    run_sql(ndb,
            "CREATE TABLESPACE ts_1 ADD DATAFILE 'data1.dat' USE LOGFILE GROUP lg "
            "INITIAL_SIZE=4M EXTENT_SIZE=256K ENGINE=NDB",
            false);

    NdbDictionary::Dictionary* dict = ndb.getDictionary();
    NdbDictionary::Table t("api_disk");
    NdbDictionary::Column id("ID"), v("V"), w("W");
    id.setType(NdbDictionary::Column::Unsigned);
    id.setPrimaryKey(true);
    v.setType(NdbDictionary::Column::Bigunsigned);
    v.setStorageType(NdbDictionary::Column::StorageTypeDisk);
    w.setType(NdbDictionary::Column::Unsigned);
    w.setStorageType(NdbDictionary::Column::StorageTypeDisk);
    t.addColumn(id);
    t.addColumn(v);
    t.addColumn(w);
    t.setTablespaceName("ts_1");
    if (dict->createTable(t) != 0) APIERROR(dict->getNdbError());
    const NdbDictionary::Table* table = dict->getTable("api_disk");
    if (table == NULL) APIERROR(dict->getNdbError());
    printf("api_disk: V on %s, tablespace %s\n",
           table->getColumn("V")->getStorageType() == NdbDictionary::Column::StorageTypeDisk
               ? "disk"
               : "memory",
           table->getTablespaceName());

    write_rows(ndb, table);
    read_rows(ndb, table);

    NdbDictionary::Index idx("ix_w");
    idx.setTable("api_disk");
    idx.setType(NdbDictionary::Index::OrderedIndex);
    idx.addColumnName("W");
    idx.setLogging(false);
    if (dict->createIndex(idx) != 0)
      printf("index on a disk column: error %d\n", dict->getNdbError().code);

    run_sql(ndb,
            "SELECT file_name, free_extents < total_extents AS used FROM "
            "information_schema.files WHERE file_type = 'DATAFILE' ORDER BY 1",
            true);
    if (dict->dropTable("api_disk") != 0) APIERROR(dict->getNdbError());
  }
  ndb_end(0);
  return 0;
}
