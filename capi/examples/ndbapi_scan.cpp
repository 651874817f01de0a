/*
 * ndbapi_scan.cpp: full-table scans, as NDB's ndbapi_scan example: print all rows,
 * update rows through the scan (updateCurrentTuple), delete rows through the scan
 * (deleteCurrentTuple), print again.
 *
 * Table api_scan (REG_NO INT UNSIGNED key, BRAND CHAR(20), COLOR VARCHAR(20)) is
 * created through the dictionary API. COLOR shows NDB's VARCHAR format: one length
 * byte, then the characters. Rows come from the partitions in no particular order;
 * the program sorts them by REG_NO before printing.
 */
#include <NdbApi.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define APIERROR(error)                                                                  \
  {                                                                                      \
    printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, (error).code, \
           (error).message);                                                             \
    exit(-1);                                                                            \
  }

struct Car {
  unsigned int reg_no;
  char brand[20];
  char color[20];
};

static const char* brands[] = {"Mercedes", "Volvo", "Saab"};
static const char* colors[] = {"Blue", "Black", "Pink", "Red", "White"};

/* CHAR: padded with spaces to its length. */
static void set_char(char* dst, const char* s, size_t n) {
  memset(dst, ' ', n);
  memcpy(dst, s, strlen(s));
}

/* VARCHAR(20) latin1: 1 length byte, then the bytes. */
static void set_varchar(char* dst, const char* s) {
  dst[0] = (char)strlen(s);
  memcpy(dst + 1, s, strlen(s));
}

static std::string from_char(const char* b, size_t n) {
  std::string s(b, n);
  s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

static std::string from_varchar(const char* b) { return std::string(b + 1, (unsigned char)b[0]); }

static void create_table(Ndb& ndb) {
  NdbDictionary::Dictionary* dict = ndb.getDictionary();
  NdbDictionary::Table t("api_scan");
  NdbDictionary::Column reg("REG_NO");
  reg.setType(NdbDictionary::Column::Unsigned);
  reg.setPrimaryKey(true);
  t.addColumn(reg);
  NdbDictionary::Column brand("BRAND");
  brand.setType(NdbDictionary::Column::Char);
  brand.setLength(20);
  brand.setNullable(false);
  t.addColumn(brand);
  NdbDictionary::Column color("COLOR");
  color.setType(NdbDictionary::Column::Varchar);
  color.setLength(20);
  color.setNullable(false);
  t.addColumn(color);
  if (dict->createTable(t) == -1) APIERROR(dict->getNdbError());
}

static void populate(Ndb& ndb) {
  const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_scan");
  if (t == NULL) APIERROR(ndb.getDictionary()->getNdbError());
  NdbTransaction* tx = ndb.startTransaction();
  for (unsigned i = 0; i < 15; i++) {
    char brand[20], color[21];
    set_char(brand, brands[i % 3], sizeof brand);
    set_varchar(color, colors[i % 5]);
    NdbOperation* op = tx->getNdbOperation(t);
    op->insertTuple();
    op->equal("REG_NO", (Uint32)i);
    op->setValue("BRAND", brand);
    op->setValue("COLOR", color);
  }
  if (tx->execute(NdbTransaction::Commit) == -1) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
}

static int scan_print(Ndb& ndb) {
  const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_scan");
  NdbTransaction* tx = ndb.startTransaction();
  if (tx == NULL) APIERROR(ndb.getNdbError());
  NdbScanOperation* scan = tx->getNdbScanOperation(t);
  if (scan == NULL) APIERROR(tx->getNdbError());
  if (scan->readTuples(NdbOperation::LM_CommittedRead) != 0) APIERROR(tx->getNdbError());
  NdbRecAttr* reg = scan->getValue("REG_NO");
  NdbRecAttr* brand = scan->getValue("BRAND");
  char color[21];
  scan->getValue("COLOR", color);
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());

  std::vector<std::pair<unsigned, std::string> > rows;
  int check;
  while ((check = scan->nextResult(true)) == 0) {
    do {
      rows.push_back(std::make_pair(reg->u_32_value(), from_char(brand->aRef(), 20) + " " +
                                                           from_varchar(color)));
    } while ((check = scan->nextResult(false)) == 0);
  }
  if (check == -1) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
  std::sort(rows.begin(), rows.end());
  for (size_t i = 0; i < rows.size(); i++) printf("%2u %s\n", rows[i].first, rows[i].second.c_str());
  printf("%d cars\n", (int)rows.size());
  return (int)rows.size();
}

/* Repaints every car of one color, through the scan. */
static void scan_update(Ndb& ndb, const char* from, const char* to) {
  const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_scan");
  NdbTransaction* tx = ndb.startTransaction();
  NdbScanOperation* scan = tx->getNdbScanOperation(t);
  if (scan->readTuples(NdbOperation::LM_Exclusive) != 0) APIERROR(tx->getNdbError());
  NdbRecAttr* color = scan->getValue("COLOR");
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  int updated = 0, check;
  char value[21];
  set_varchar(value, to);
  while ((check = scan->nextResult(true)) == 0) {
    do {
      if (from_varchar(color->aRef()) == from) {
        NdbOperation* op = scan->updateCurrentTuple();
        if (op == NULL || op->setValue("COLOR", value) != 0) APIERROR(tx->getNdbError());
        updated++;
      }
    } while ((check = scan->nextResult(false)) == 0);
    if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  }
  if (check == -1) APIERROR(tx->getNdbError());
  if (tx->execute(NdbTransaction::Commit) != 0) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
  printf("Repainted %d %s cars %s\n", updated, from, to);
}

/* Deletes every car of one brand, through the scan. */
static void scan_delete(Ndb& ndb, const char* which) {
  const NdbDictionary::Table* t = ndb.getDictionary()->getTable("api_scan");
  NdbTransaction* tx = ndb.startTransaction();
  NdbScanOperation* scan = tx->getNdbScanOperation(t);
  if (scan->readTuples(NdbOperation::LM_Exclusive) != 0) APIERROR(tx->getNdbError());
  NdbRecAttr* brand = scan->getValue("BRAND");
  if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  int deleted = 0, check;
  while ((check = scan->nextResult(true)) == 0) {
    do {
      if (from_char(brand->aRef(), 20) == which) {
        if (scan->deleteCurrentTuple() != 0) APIERROR(tx->getNdbError());
        deleted++;
      }
    } while ((check = scan->nextResult(false)) == 0);
    if (tx->execute(NdbTransaction::NoCommit) != 0) APIERROR(tx->getNdbError());
  }
  if (check == -1) APIERROR(tx->getNdbError());
  if (tx->execute(NdbTransaction::Commit) != 0) APIERROR(tx->getNdbError());
  ndb.closeTransaction(tx);
  printf("Deleted %d %s cars\n", deleted, which);
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
    create_table(ndb);
    populate(ndb);
    printf("All cars:\n");
    scan_print(ndb);
    scan_update(ndb, "Blue", "Black");
    scan_delete(ndb, "Mercedes");
    printf("All cars now:\n");
    scan_print(ndb);
  }
  ndb_end(0);
  return 0;
}
