/*
 * ndbapi_record.cpp: primary-key operations with NdbRecord, NDB's row-buffer interface:
 * one call defines a whole operation from a row (values at fixed offsets, NULL bits),
 * and a read writes its result row.
 *
 * Table api_rec (ID INT UNSIGNED key, V BIGINT NULL, NAME VARCHAR(20) NULL) through
 * the dictionary API; one record over all three columns, on the struct Row below.
 */
#include <NdbApi.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define APIERROR(error)                                                                  \
  {                                                                                      \
    printf("Error in %s, line: %d, code: %d, msg: %s.\n", __FILE__, __LINE__, (error).code, \
           (error).message);                                                             \
    exit(-1);                                                                            \
  }

struct Row {
  Uint32 id;
  Int64 v;
  char name[21]; /* VARCHAR(20) latin1: length byte + 20 */
  unsigned char nulls;
};

static void set_row(Row& r, Uint32 id, Int64 v, const char* name) {
  memset(&r, 0, sizeof r);
  r.id = id;
  r.v = v;
  if (name) {
    r.name[0] = (char)strlen(name);
    memcpy(r.name + 1, name, strlen(name));
  } else {
    r.nulls |= 2;
  }
}

static void print_row(const Row& r) {
  printf("  ID=%u V=", r.id);
  if (r.nulls & 1)
    printf("NULL");
  else
    printf("%lld", (long long)r.v);
  if (r.nulls & 2)
    printf(" NAME=NULL\n");
  else
    printf(" NAME=%.*s\n", (int)(unsigned char)r.name[0], r.name + 1);
}

struct Pending {
  Row key, out;
  NdbTransaction* tx;
};

static void done(int result, NdbTransaction* tx, void* arg) {
  Pending* p = static_cast<Pending*>(arg);
  if (result == 0)
    print_row(p->out);
  else
    printf("  ID=%u: error %d (%s)\n", p->key.id, tx->getNdbError().code, tx->getNdbError().message);
}

/* Committed reads prepared with executeAsynchPrepare and sent together. */
static void read_async(Ndb& ndb, const NdbRecord* rec, const Uint32* ids, int n) {
  Pending p[8];
  for (int i = 0; i < n; i++) {
    p[i].key.id = ids[i];
    p[i].tx = ndb.startTransaction();
    if (p[i].tx->readTuple(rec, (const char*)&p[i].key, rec, (char*)&p[i].out,
                           NdbOperation::LM_CommittedRead) == NULL)
      APIERROR(p[i].tx->getNdbError());
    p[i].tx->executeAsynchPrepare(NdbTransaction::Commit, &done, &p[i]);
  }
  printf("  sendPollNdb: %d completed\n", ndb.sendPollNdb());
  for (int i = 0; i < n; i++) ndb.closeTransaction(p[i].tx);
}

/* A row of api_ints: every column a NOT NULL integer (one call per write copies them
 * without looking at column types). */
struct IntRow {
  Uint32 k;
  Int8 a;
  Uint16 b;
  Int32 c;
  Int64 d;
};

struct IntPending {
  IntRow row;
  NdbTransaction* tx;
  const char* what;
};

static void int_done(int result, NdbTransaction* tx, void* arg) {
  IntPending* p = static_cast<IntPending*>(arg);
  const NdbOperation* op = tx->getNdbErrorOperation();
  printf("  %s K=%u: result %d, error %d, operation error %d\n", p->what, p->row.k, result,
         tx->getNdbError().code, op ? op->getNdbError().code : 0);
}

/* Single-operation write transactions, prepared together and sent with sendPollNdb. */
static void int_writes(Ndb& ndb, const NdbRecord* rec) {
  printf("Single writes, asynchronous (all-integer record): insert K=1,2,3, insert K=2 "
         "again, update K=3, delete K=9 (missing) with AO_IgnoreError, delete K=1:\n");
  IntPending p[7];
  const char* what[] = {"insert", "insert", "insert", "insert", "update", "delete", "delete"};
  const Uint32 keys[] = {1, 2, 3, 2, 3, 9, 1};
  for (int i = 0; i < 7; i++) {
    IntRow& r = p[i].row;
    memset(&r, 0, sizeof r);
    r.k = keys[i];
    r.a = (Int8)(-100 - (int)keys[i]);
    r.b = (Uint16)(65000 + keys[i]);
    r.c = -2000000000 - (Int32)keys[i];
    r.d = i == 4 ? (Int64)-1 : (Int64)0x7000000000000000LL + keys[i];
    p[i].what = what[i];
    p[i].tx = ndb.startTransaction();
    const NdbOperation* op =
        i < 4    ? p[i].tx->insertTuple(rec, (const char*)&r)
        : i == 4 ? p[i].tx->updateTuple(rec, (const char*)&r, rec, (const char*)&r)
                 : p[i].tx->deleteTuple(rec, (const char*)&r);
    if (op == NULL) APIERROR(p[i].tx->getNdbError());
    p[i].tx->executeAsynchPrepare(NdbTransaction::Commit, &int_done, &p[i],
                                  i == 5 ? NdbOperation::AO_IgnoreError
                                         : NdbOperation::AbortOnError);
  }
  printf("  sendPollNdb: %d completed\n", ndb.sendPollNdb());
  printf("  execute again after the failed insert: %d, error %d\n",
         p[3].tx->execute(NdbTransaction::Commit), p[3].tx->getNdbError().code);
  for (int i = 0; i < 7; i++) ndb.closeTransaction(p[i].tx);
  for (Uint32 k = 1; k <= 3; k++) {
    NdbTransaction* tx = ndb.startTransaction();
    IntRow key, out;
    memset(&key, 0, sizeof key);
    memset(&out, 0xAA, sizeof out);
    key.k = k;
    if (tx->readTuple(rec, (const char*)&key, rec, (char*)&out, NdbOperation::LM_CommittedRead) ==
        NULL)
      APIERROR(tx->getNdbError());
    if (tx->execute(NdbTransaction::Commit) == 0)
      printf("  K=%u A=%d B=%u C=%d D=%lld\n", out.k, (int)out.a, (unsigned)out.b, (int)out.c,
             (long long)out.d);
    else
      printf("  K=%u: error %d\n", k, tx->getNdbError().code);
    ndb.closeTransaction(tx);
  }
}

static void read_all(Ndb& ndb, const NdbRecord* rec) {
  for (Uint32 id = 0; id < 8; id++) {
    NdbTransaction* tx = ndb.startTransaction();
    Row key, out;
    memset(&out, 0xAA, sizeof out);
    key.id = id;
    if (tx->readTuple(rec, (const char*)&key, rec, (char*)&out, NdbOperation::LM_CommittedRead) ==
        NULL)
      APIERROR(tx->getNdbError());
    if (tx->execute(NdbTransaction::Commit) == 0)
      print_row(out);
    else if (tx->getNdbError().classification == NdbError::NoDataFound)
      printf("  ID=%u not found (%d)\n", id, tx->getNdbError().code);
    else
      APIERROR(tx->getNdbError());
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
    NdbDictionary::Dictionary* dict = ndb.getDictionary();

    NdbDictionary::Table t("api_rec");
    NdbDictionary::Column id("ID"), v("V"), name("NAME");
    id.setType(NdbDictionary::Column::Unsigned);
    id.setPrimaryKey(true);
    v.setType(NdbDictionary::Column::Bigint);
    v.setNullable(true);
    name.setType(NdbDictionary::Column::Varchar);
    name.setLength(20);
    name.setNullable(true);
    t.addColumn(id);
    t.addColumn(v);
    t.addColumn(name);
    if (dict->createTable(t) != 0) APIERROR(dict->getNdbError());
    const NdbDictionary::Table* tab = dict->getTable("api_rec");

    NdbDictionary::RecordSpecification spec[3];
    spec[0].column = tab->getColumn("ID");
    spec[0].offset = offsetof(Row, id);
    spec[0].nullbit_byte_offset = 0;
    spec[0].nullbit_bit_in_byte = 0;
    spec[0].column_flags = 0;
    spec[1].column = tab->getColumn("V");
    spec[1].offset = offsetof(Row, v);
    spec[1].nullbit_byte_offset = offsetof(Row, nulls);
    spec[1].nullbit_bit_in_byte = 0;
    spec[1].column_flags = 0;
    spec[2].column = tab->getColumn("NAME");
    spec[2].offset = offsetof(Row, name);
    spec[2].nullbit_byte_offset = offsetof(Row, nulls);
    spec[2].nullbit_bit_in_byte = 1;
    spec[2].column_flags = 0;
    const NdbRecord* rec = dict->createRecord(tab, spec, 3, sizeof(spec[0]));
    if (rec == NULL) APIERROR(dict->getNdbError());

    printf("Insert 5 rows, one transaction:\n");
    Row rows[5];
    const char* names[] = {"zero", "one", "two", NULL, "four"};
    NdbTransaction* tx = ndb.startTransaction();
    for (Uint32 i = 0; i < 5; i++) {
      set_row(rows[i], i, (Int64)i * -1000, names[i]);
      if (i == 2) rows[i].nulls |= 1;
      if (tx->insertTuple(rec, (const char*)&rows[i]) == NULL) APIERROR(tx->getNdbError());
    }
    if (tx->execute(NdbTransaction::Commit) != 0) APIERROR(tx->getNdbError());
    ndb.closeTransaction(tx);
    read_all(ndb, rec);

    printf("Update V of ID 1 only (mask), write ID 7, delete ID 0:\n");
    tx = ndb.startTransaction();
    Row r;
    set_row(r, 1, 111, "ignored");
    unsigned char mask = 1 << 1; /* attribute id 1: V */
    if (tx->updateTuple(rec, (const char*)&r, rec, (const char*)&r, &mask) == NULL)
      APIERROR(tx->getNdbError());
    Row w;
    set_row(w, 7, 7, "seven");
    if (tx->writeTuple(rec, (const char*)&w, rec, (const char*)&w) == NULL)
      APIERROR(tx->getNdbError());
    Row d;
    d.id = 0;
    if (tx->deleteTuple(rec, (const char*)&d) == NULL) APIERROR(tx->getNdbError());
    if (tx->execute(NdbTransaction::Commit) != 0) APIERROR(tx->getNdbError());
    ndb.closeTransaction(tx);
    read_all(ndb, rec);

    printf("Asynchronous reads of IDs 4, 6 (missing), 1, 2:\n");
    const Uint32 ids[] = {4, 6, 1, 2};
    read_async(ndb, rec, ids, 4);

    printf("Two reads in one transaction (ID 2, missing ID 6), AO_IgnoreError:\n");
    {
      NdbTransaction* t2 = ndb.startTransaction();
      Row k1, o1, k2, o2;
      memset(&k1, 0, sizeof k1);
      memset(&k2, 0, sizeof k2);
      k1.id = 2;
      k2.id = 6;
      const NdbOperation* op1 = t2->readTuple(rec, (const char*)&k1, rec, (char*)&o1,
                                              NdbOperation::LM_CommittedRead);
      if (op1 == NULL) APIERROR(t2->getNdbError());
      printf("  first read before execute: error %d\n", op1->getNdbError().code);
      const NdbOperation* op2 = t2->readTuple(rec, (const char*)&k2, rec, (char*)&o2,
                                              NdbOperation::LM_CommittedRead);
      if (op2 == NULL) APIERROR(t2->getNdbError());
      int r = t2->execute(NdbTransaction::Commit, NdbOperation::AO_IgnoreError);
      printf("  execute: %d\n", r);
      print_row(o1);
      printf("  first read: error %d, second read: error %d\n", op1->getNdbError().code,
             op2->getNdbError().code);
      ndb.closeTransaction(t2);
    }

    printf("A locking read (LM_Read) and a committed read of a missing ID, asynchronous:\n");
    {
      Pending p2[2];
      for (int i = 0; i < 2; i++) {
        memset(&p2[i].key, 0, sizeof p2[i].key);
        p2[i].key.id = i == 0 ? 3 : 5;
        p2[i].tx = ndb.startTransaction();
        const NdbOperation* op =
            p2[i].tx->readTuple(rec, (const char*)&p2[i].key, rec, (char*)&p2[i].out,
                                i == 0 ? NdbOperation::LM_Read : NdbOperation::LM_CommittedRead);
        if (op == NULL) APIERROR(p2[i].tx->getNdbError());
        p2[i].tx->executeAsynchPrepare(NdbTransaction::Commit, &done, &p2[i]);
      }
      printf("  sendPollNdb: %d completed\n", ndb.sendPollNdb());
      const NdbOperation* failed = p2[1].tx->getNdbErrorOperation();
      printf("  failed operation: %s, error %d\n", failed ? "found" : "none",
             failed ? failed->getNdbError().code : 0);
      for (int i = 0; i < 2; i++) ndb.closeTransaction(p2[i].tx);
    }

    printf("A read prepared and closed without sending:\n");
    {
      Pending p3;
      memset(&p3.key, 0, sizeof p3.key);
      p3.key.id = 1;
      p3.tx = ndb.startTransaction();
      p3.tx->readTuple(rec, (const char*)&p3.key, rec, (char*)&p3.out,
                       NdbOperation::LM_CommittedRead);
      p3.tx->executeAsynchPrepare(NdbTransaction::Commit, &done, &p3);
      ndb.closeTransaction(p3.tx);
      printf("  sendPollNdb: %d completed\n", ndb.sendPollNdb());
    }

    printf("Insert of an existing key:\n");
    tx = ndb.startTransaction();
    tx->insertTuple(rec, (const char*)&w);
    if (tx->execute(NdbTransaction::Commit) != 0)
      printf("  error %d: %s\n", tx->getNdbError().code, tx->getNdbError().message);
    ndb.closeTransaction(tx);
    dict->releaseRecord(const_cast<NdbRecord*>(rec));

    NdbDictionary::Table ti("api_ints");
    const char* int_names[] = {"K", "A", "B", "C", "D"};
    const NdbDictionary::Column::Type int_types[] = {
        NdbDictionary::Column::Unsigned, NdbDictionary::Column::Tinyint,
        NdbDictionary::Column::Smallunsigned, NdbDictionary::Column::Int,
        NdbDictionary::Column::Bigint};
    for (int c = 0; c < 5; c++) {
      NdbDictionary::Column col(int_names[c]);
      col.setType(int_types[c]);
      col.setPrimaryKey(c == 0);
      col.setNullable(false);
      ti.addColumn(col);
    }
    if (dict->createTable(ti) != 0) APIERROR(dict->getNdbError());
    const NdbDictionary::Table* tabi = dict->getTable("api_ints");
    const Uint32 int_offsets[] = {offsetof(IntRow, k), offsetof(IntRow, a), offsetof(IntRow, b),
                                  offsetof(IntRow, c), offsetof(IntRow, d)};
    NdbDictionary::RecordSpecification ispec[5];
    for (int c = 0; c < 5; c++) {
      ispec[c].column = tabi->getColumn(c);
      ispec[c].offset = int_offsets[c];
      ispec[c].nullbit_byte_offset = 0;
      ispec[c].nullbit_bit_in_byte = 0;
      ispec[c].column_flags = 0;
    }
    const NdbRecord* irec = dict->createRecord(tabi, ispec, 5, sizeof(ispec[0]));
    if (irec == NULL) APIERROR(dict->getNdbError());
    int_writes(ndb, irec);
    dict->releaseRecord(const_cast<NdbRecord*>(irec));
  }
  ndb_end(0);
  return 0;
}
