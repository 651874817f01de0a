/*
 * NdbApi.hpp: MySQL Cluster's NDB API (C++) over librndb's C ABI (rndb.h), header-only.
 *
 * An NDB API program ports by changing its include to this file and its connectstring
 * to "embedded" (or "embedded;datadir=PATH;config=PATH;Parameter=value"), which starts
 * the cluster inside the process. Class names, method signatures and enum values are
 * NDB's (NdbDictionary::Column::Int == 7, NdbOperation::LM_CommittedRead == 2,
 * NdbTransaction::Commit == 2, NdbIndexScanOperation::BoundLE == 0 ...).
 *
 * Build: g++ app.cpp $(pkg-config --cflags --libs rndb)
 *
 * Objects the application makes (Ndb_cluster_connection, Ndb, NdbDictionary::Table,
 * Column, Index) are C++ objects holding an rndb handle. Objects the API hands out by
 * pointer (NdbTransaction, NdbOperation, NdbScanOperation, NdbIndexScanOperation,
 * NdbRecAttr) are the handles themselves: their pointer value is the checked rndb
 * handle and they have no data, so a pointer kept after closeTransaction is reported
 * as an error (4604) instead of touching freed memory. Never dereference or copy them;
 * call their methods, as with NDB.
 *
 * Differences from NDB API worth knowing: see capi/README.md.
 */
#ifndef RNDB_NDBAPI_HPP
#define RNDB_NDBAPI_HPP

#include "rndb.h"

#include <cstddef>
#include <cstring>
#include <map>
#include <string>

/* NDB's integer typedefs (ndb_types.h). */
typedef uint8_t Uint8;
typedef int8_t Int8;
typedef uint16_t Uint16;
typedef int16_t Int16;
typedef uint32_t Uint32;
typedef int32_t Int32;
typedef unsigned long long Uint64;
typedef signed long long Int64;

/* ndb_init(): optional library initialisation; returns 0. */
inline int ndb_init() { return rndb_init(); }
/* ndb_end(flags): releases the library's handle tables once every object is freed. */
inline void ndb_end(int flags) { rndb_end(flags); }

/* NdbError: an error with NDB's code, status, classification and message. Same
 * layout as rndb_error. */
struct NdbError {
  enum Status {
    Success = 0,
    TemporaryError = 1,
    PermanentError = 2,
    UnknownResult = 3
  };
  enum Classification {
    NoError = 0,
    ApplicationError = 1,
    NoDataFound = 2,
    ConstraintViolation = 3,
    SchemaError = 4,
    UserDefinedError = 5,
    InsufficientSpace = 6,
    TemporaryResourceError = 7,
    NodeRecoveryError = 8,
    OverloadError = 9,
    TimeoutExpired = 10,
    UnknownResultError = 11,
    InternalError = 12,
    FunctionNotImplemented = 13,
    UnknownErrorCode = 14,
    NodeShutdown = 15,
    SchemaObjectExists = 17,
    InternalTemporary = 18
  };
  Status status;
  Classification classification;
  int code;
  int mysql_code;
  const char* message;
  char* details;
  NdbError()
      : status(Success), classification(NoError), code(0), mysql_code(0), message(""), details(0) {}
};

static_assert(sizeof(NdbError) == sizeof(rndb_error), "NdbError mirrors rndb_error");
static_assert(offsetof(NdbError, code) == offsetof(rndb_error, code), "NdbError::code");
static_assert(offsetof(NdbError, message) == offsetof(rndb_error, message), "NdbError::message");

namespace rndb_detail {
inline const NdbError& err(const rndb_error* e) { return *reinterpret_cast<const NdbError*>(e); }
}  // namespace rndb_detail

class Ndb;
class NdbTransaction;
class NdbOperation;
class NdbScanOperation;
class NdbIndexScanOperation;
class NdbRecAttr;

/* NdbRecord: a row layout made by Dictionary::createRecord (opaque, like NDB's). */
class NdbRecord {
 private:
  NdbRecord();
  ~NdbRecord();
  NdbRecord(const NdbRecord&);
};

/* NdbAsynchCallback: called by sendPollNdb/pollNdb with result 0 (ok) or -1 (failed,
 * see trans->getNdbError()). */
typedef void (*NdbAsynchCallback)(int result, NdbTransaction* trans, void* anyObject);

/* NdbDictionary: the schema objects. */
class NdbDictionary {
 public:
  class Table;
  class Index;
  class Dictionary;

  class Object {
   public:
    enum Type {
      TypeUndefined = 0,
      SystemTable = 1,
      UserTable = 2,
      UniqueHashIndex = 3,
      OrderedIndex = 6
    };
  };

  class Column {
   public:
    enum Type {
      Undefined = 0,
      Tinyint = 1,
      Tinyunsigned = 2,
      Smallint = 3,
      Smallunsigned = 4,
      Mediumint = 5,
      Mediumunsigned = 6,
      Int = 7,
      Unsigned = 8,
      Bigint = 9,
      Bigunsigned = 10,
      Float = 11,
      Double = 12,
      Olddecimal = 13,
      Olddecimalunsigned = 14,
      Decimal = 15,
      Decimalunsigned = 16,
      Char = 17,
      Varchar = 18,
      Binary = 19,
      Varbinary = 20,
      Datetime = 21,
      Date = 22,
      Blob = 23,
      Text = 24,
      Bit = 25,
      Longvarchar = 26,
      Longvarbinary = 27,
      Time = 28,
      Year = 29,
      Timestamp = 30
    };
    enum StorageType { StorageTypeMemory = 0, StorageTypeDisk = 1, StorageTypeDefault = 2 };

    Column(const char* name = "") : m_h(rndb_column_create(name)), m_owned(true) {}
    Column(const Column& o) : m_h(rndb_column_copy(o.m_h)), m_owned(true) {}
    Column& operator=(const Column& o) {
      if (this != &o) {
        if (m_owned) rndb_column_free(m_h);
        m_h = rndb_column_copy(o.m_h);
        m_owned = true;
      }
      return *this;
    }
    ~Column() {
      if (m_owned) rndb_column_free(m_h);
    }

    int setName(const char* name) { return rndb_column_set_name(m_h, name); }
    const char* getName() const { return rndb_column_get_name(m_h); }
    void setType(Type t) { rndb_column_set_type(m_h, (int)t); }
    Type getType() const { return (Type)rndb_column_get_type(m_h); }
    void setLength(int length) { rndb_column_set_length(m_h, length); }
    int getLength() const { return rndb_column_get_length(m_h); }
    void setPrecision(int p) { rndb_column_set_precision(m_h, p); }
    int getPrecision() const { return rndb_column_get_precision(m_h); }
    void setScale(int s) { rndb_column_set_scale(m_h, s); }
    int getScale() const { return rndb_column_get_scale(m_h); }
    void setPrimaryKey(bool pk) { rndb_column_set_primary_key(m_h, pk ? 1 : 0); }
    bool getPrimaryKey() const { return rndb_column_get_primary_key(m_h) == 1; }
    void setNullable(bool n) { rndb_column_set_nullable(m_h, n ? 1 : 0); }
    bool getNullable() const { return rndb_column_get_nullable(m_h) == 1; }
    void setPartitionKey(bool on) { rndb_column_set_partition_key(m_h, on ? 1 : 0); }
    bool getPartitionKey() const { return rndb_column_get_partition_key(m_h) == 1; }
    void setAutoIncrement(bool on) { rndb_column_set_auto_increment(m_h, on ? 1 : 0); }
    bool getAutoIncrement() const { return rndb_column_get_auto_increment(m_h) == 1; }
    void setStorageType(StorageType t) {
      rndb_column_set_storage_type(m_h, t == StorageTypeDisk ? 1 : 0);
    }
    StorageType getStorageType() const {
      return rndb_column_get_storage_type(m_h) == 1 ? StorageTypeDisk : StorageTypeMemory;
    }
    int getColumnNo() const { return rndb_column_get_column_no(m_h); }
    int getAttrId() const { return rndb_column_get_column_no(m_h); }
    int getSizeInBytes() const { return rndb_column_get_size_in_bytes(m_h); }
    rndb_column* rndb_handle() const { return m_h; }

   private:
    friend class Table;
    friend class Index;
    Column(rndb_column* h, bool owned) : m_h(h), m_owned(owned) {}
    rndb_column* m_h;
    bool m_owned;
  };

  class Table {
   public:
    Table(const char* name = "") : m_h(rndb_table_create(name)), m_owned(true) {}
    Table(const Table& o) : m_h(rndb_table_copy(o.m_h)), m_owned(true) {}
    Table& operator=(const Table& o) {
      if (this != &o) {
        clear();
        if (m_owned) rndb_table_free(m_h);
        m_h = rndb_table_copy(o.m_h);
        m_owned = true;
      }
      return *this;
    }
    ~Table() {
      clear();
      if (m_owned) rndb_table_free(m_h);
    }

    int setName(const char* name) { return rndb_table_set_name(m_h, name); }
    const char* getName() const { return rndb_table_get_name(m_h); }
    int getTableId() const { return rndb_table_get_table_id(m_h); }
    int addColumn(const Column& c) { return rndb_table_add_column(m_h, c.m_h); }
    int getNoOfColumns() const { return rndb_table_get_no_of_columns(m_h); }
    const Column* getColumn(int attributeId) const {
      return wrap(rndb_table_get_column(m_h, attributeId));
    }
    Column* getColumn(int attributeId) { return wrap(rndb_table_get_column(m_h, attributeId)); }
    const Column* getColumn(const char* name) const {
      return wrap(rndb_table_get_column_by_name(m_h, name));
    }
    Column* getColumn(const char* name) { return wrap(rndb_table_get_column_by_name(m_h, name)); }
    int getNoOfPrimaryKeys() const { return rndb_table_get_no_of_primary_keys(m_h); }
    const char* getPrimaryKey(int no) const { return rndb_table_get_primary_key(m_h, no); }
    void setLogging(bool on) { rndb_table_set_logging(m_h, on ? 1 : 0); }
    bool getLogging() const { return rndb_table_get_logging(m_h) == 1; }
    int setTablespaceName(const char* name) { return rndb_table_set_tablespace_name(m_h, name); }
    const char* getTablespaceName() const { return rndb_table_get_tablespace_name(m_h); }
    rndb_table* rndb_handle() const { return m_h; }

   private:
    friend class Dictionary;
    explicit Table(const rndb_table* h) : m_h(const_cast<rndb_table*>(h)), m_owned(false) {}
    Column* wrap(rndb_column* c) const {
      if (!c) return 0;
      std::map<rndb_column*, Column*>::iterator it = m_cols.find(c);
      if (it != m_cols.end()) return it->second;
      Column* w = new Column(c, false);
      m_cols[c] = w;
      return w;
    }
    void clear() {
      for (std::map<rndb_column*, Column*>::iterator it = m_cols.begin(); it != m_cols.end(); ++it)
        delete it->second;
      m_cols.clear();
    }
    rndb_table* m_h;
    bool m_owned;
    mutable std::map<rndb_column*, Column*> m_cols;
  };

  class Index {
   public:
    enum Type { Undefined = 0, UniqueHashIndex = 3, OrderedIndex = 6 };

    Index(const char* name = "") : m_h(rndb_index_create(name)), m_owned(true) {}
    ~Index() {
      for (std::map<const rndb_column*, Column*>::iterator it = m_cols.begin(); it != m_cols.end();
           ++it)
        delete it->second;
      if (m_owned) rndb_index_free(m_h);
    }

    int setName(const char* name) { return rndb_index_set_name(m_h, name); }
    const char* getName() const { return rndb_index_get_name(m_h); }
    int setTable(const char* name) { return rndb_index_set_table(m_h, name); }
    const char* getTable() const { return rndb_index_get_table(m_h); }
    void setType(Type t) { rndb_index_set_type(m_h, (int)t); }
    Type getType() const { return (Type)rndb_index_get_type(m_h); }
    int addColumnName(const char* name) { return rndb_index_add_column_name(m_h, name); }
    int addColumn(const Column& c) { return rndb_index_add_column(m_h, c.m_h); }
    int addColumnNames(unsigned no, const char** names) {
      for (unsigned i = 0; i < no; i++)
        if (addColumnName(names[i]) != 0) return -1;
      return 0;
    }
    unsigned getNoOfColumns() const { return (unsigned)rndb_index_get_no_of_columns(m_h); }
    const Column* getColumn(unsigned no) const {
      const rndb_column* c = rndb_index_get_column(m_h, (int)no);
      if (!c) return 0;
      std::map<const rndb_column*, Column*>::iterator it = m_cols.find(c);
      if (it != m_cols.end()) return it->second;
      Column* w = new Column(const_cast<rndb_column*>(c), false);
      m_cols[c] = w;
      return w;
    }
    void setLogging(bool on) { rndb_index_set_logging(m_h, on ? 1 : 0); }
    rndb_index* rndb_handle() const { return m_h; }

   private:
    friend class Dictionary;
    explicit Index(const rndb_index* h) : m_h(const_cast<rndb_index*>(h)), m_owned(false) {}
    Index(const Index&);
    Index& operator=(const Index&);
    rndb_index* m_h;
    bool m_owned;
    mutable std::map<const rndb_column*, Column*> m_cols;
  };

  /* One column of an NdbRecord: where its value (NDB's format) and NULL bit are. */
  struct RecordSpecification {
    const Column* column;
    Uint32 offset;
    Uint32 nullbit_byte_offset;
    Uint32 nullbit_bit_in_byte;
    Uint32 column_flags;
    static Uint32 size() { return sizeof(RecordSpecification); }
  };

  class Dictionary {
   public:
    /* NdbRecord of `length` columns of a table; NULL on error (getNdbError()). */
    NdbRecord* createRecord(const Table* table, const RecordSpecification* recSpec, Uint32 length,
                            Uint32 elemSize, Uint32 flags = 0) {
      (void)flags;
      if (!table) return 0;
      rndb_record_spec* specs = new rndb_record_spec[length ? length : 1];
      for (Uint32 i = 0; i < length; i++) {
        const RecordSpecification& r = recSpec[i];
        specs[i].column = r.column ? r.column->rndb_handle() : 0;
        specs[i].offset = r.offset;
        specs[i].nullbit_byte_offset = r.nullbit_byte_offset;
        specs[i].nullbit_bit_in_byte = r.nullbit_bit_in_byte;
        specs[i].column_flags = r.column_flags;
      }
      Uint32 size = elemSize == sizeof(RecordSpecification) ? (Uint32)sizeof(rndb_record_spec) : elemSize;
      const rndb_record* rec = rndb_dict_create_record(m_h, table->rndb_handle(), specs, length, size);
      delete[] specs;
      return const_cast<NdbRecord*>(reinterpret_cast<const NdbRecord*>(rec));
    }
    void releaseRecord(NdbRecord* rec) {
      rndb_dict_release_record(m_h, reinterpret_cast<const rndb_record*>(rec));
    }
    const Table* getTable(const char* name) const {
      const rndb_table* t = rndb_dict_get_table(m_h, name);
      if (!t) return 0;
      std::map<const rndb_table*, Table*>::iterator it = m_tables.find(t);
      if (it != m_tables.end()) return it->second;
      Table* w = new Table(t);
      m_tables[t] = w;
      return w;
    }
    const Index* getIndex(const char* indexName, const char* tableName) const {
      const rndb_index* i = rndb_dict_get_index(m_h, indexName, tableName);
      if (!i) return 0;
      std::map<const rndb_index*, Index*>::iterator it = m_indexes.find(i);
      if (it != m_indexes.end()) return it->second;
      Index* w = new Index(i);
      m_indexes[i] = w;
      return w;
    }
    int createTable(const Table& t) { return rndb_dict_create_table(m_h, t.m_h); }
    int dropTable(const char* name) { return rndb_dict_drop_table(m_h, name); }
    int dropTable(Table& t) { return rndb_dict_drop_table(m_h, t.getName()); }
    int createIndex(const Index& i) { return rndb_dict_create_index(m_h, i.m_h); }
    int dropIndex(const char* indexName, const char* tableName) {
      return rndb_dict_drop_index(m_h, indexName, tableName);
    }
    /* The dictionary re-reads tables on every getTable: nothing to invalidate. */
    void invalidateTable(const char*) {}
    void removeCachedTable(const char*) {}
    const NdbError& getNdbError() const { return rndb_detail::err(rndb_dict_get_error(m_h)); }
    rndb_dictionary* rndb_handle() const { return m_h; }

    ~Dictionary() {
      for (std::map<const rndb_table*, Table*>::iterator it = m_tables.begin();
           it != m_tables.end(); ++it)
        delete it->second;
      for (std::map<const rndb_index*, Index*>::iterator it = m_indexes.begin();
           it != m_indexes.end(); ++it)
        delete it->second;
    }

   private:
    friend class ::Ndb;
    explicit Dictionary(rndb_dictionary* h) : m_h(h) {}
    Dictionary(const Dictionary&);
    Dictionary& operator=(const Dictionary&);
    rndb_dictionary* m_h;
    mutable std::map<const rndb_table*, Table*> m_tables;
    mutable std::map<const rndb_index*, Index*> m_indexes;
  };
};

/* Ndb_cluster_connection: "embedded" starts the cluster in this process. */
class Ndb_cluster_connection {
 public:
  Ndb_cluster_connection(const char* connectstring = 0)
      : m_h(rndb_cluster_connection_create(connectstring)) {}
  ~Ndb_cluster_connection() { rndb_cluster_connection_free(m_h); }

  /* 0 connected, -1 failed (get_latest_error_msg() says why). */
  int connect(int no_retries = 30, int retry_delay_in_seconds = 1, int verbose = 0) {
    return rndb_cluster_connection_connect(m_h, no_retries, retry_delay_in_seconds, verbose);
  }
  int wait_until_ready(int timeout_for_first_alive, int timeout_after_first_alive) {
    return rndb_cluster_connection_wait_until_ready(m_h, timeout_for_first_alive,
                                                    timeout_after_first_alive);
  }
  void set_name(const char* name) { rndb_cluster_connection_set_name(m_h, name); }
  int get_latest_error() const { return rndb_cluster_connection_get_error(m_h)->code; }
  const char* get_latest_error_msg() const {
    return rndb_cluster_connection_get_error(m_h)->message;
  }
  unsigned no_db_nodes() {
    int n = rndb_cluster_connection_no_db_nodes(m_h);
    return n < 0 ? 0 : (unsigned)n;
  }
  rndb_cluster_connection* rndb_handle() const { return m_h; }

 private:
  Ndb_cluster_connection(const Ndb_cluster_connection&);
  Ndb_cluster_connection& operator=(const Ndb_cluster_connection&);
  rndb_cluster_connection* m_h;
};

/* NdbRecAttr: a value read by getValue, defined after execute / nextResult. */
class NdbRecAttr {
 public:
  int isNULL() const { return rndb_rec_attr_is_null(h()); }
  Uint32 u_32_value() const { return rndb_rec_attr_u32(h()); }
  Int32 int32_value() const { return rndb_rec_attr_int32(h()); }
  Uint32 u_medium_value() const { return rndb_rec_attr_u32(h()); }
  Int32 medium_value() const { return rndb_rec_attr_int32(h()); }
  Uint64 u_64_value() const { return rndb_rec_attr_u64(h()); }
  Int64 int64_value() const { return rndb_rec_attr_int64(h()); }
  Uint16 u_short_value() const { return rndb_rec_attr_u16(h()); }
  short short_value() const { return rndb_rec_attr_int16(h()); }
  Uint8 u_8_value() const { return rndb_rec_attr_u8(h()); }
  Int8 int8_value() const { return rndb_rec_attr_int8(h()); }
  char u_char_value() const { return (char)rndb_rec_attr_u8(h()); }
  char char_value() const { return (char)rndb_rec_attr_int8(h()); }
  float float_value() const { return rndb_rec_attr_float(h()); }
  double double_value() const { return rndb_rec_attr_double(h()); }
  char* aRef() const { return const_cast<char*>(rndb_rec_attr_aref(h())); }
  Uint32 get_size_in_bytes() const { return rndb_rec_attr_get_size_in_bytes(h()); }

 private:
  NdbRecAttr();
  ~NdbRecAttr();
  NdbRecAttr(const NdbRecAttr&);
  const rndb_rec_attr* h() const { return reinterpret_cast<const rndb_rec_attr*>(this); }
};

/* NdbOperation: a primary-key operation of a transaction. */
class NdbOperation {
 public:
  enum LockMode {
    LM_Read = 0,
    LM_Exclusive = 1,
    LM_CommittedRead = 2,
    LM_Dirty = 2,
    LM_SimpleRead = 3
  };
  enum AbortOption { DefaultAbortOption = -1, AbortOnError = 0, AO_IgnoreError = 2 };
  enum Type { PrimaryKeyAccess = 0, UniqueIndexAccess = 1, TableScan = 2, OrderedIndexScan = 3 };
  /* Not supported: pass NULL where NDB takes OperationOptions. */
  struct OperationOptions;

  int readTuple(LockMode lm = LM_Read) { return rndb_operation_read_tuple(oh(), (int)lm); }
  int readTupleExclusive() { return readTuple(LM_Exclusive); }
  int simpleRead() { return readTuple(LM_SimpleRead); }
  int dirtyRead() { return readTuple(LM_CommittedRead); }
  int committedRead() { return readTuple(LM_CommittedRead); }
  int insertTuple() { return rndb_operation_insert_tuple(oh()); }
  int updateTuple() { return rndb_operation_update_tuple(oh()); }
  int writeTuple() { return rndb_operation_write_tuple(oh()); }
  int deleteTuple() { return rndb_operation_delete_tuple(oh()); }

  /* equal: a primary-key column's value in NDB's format; len 0 = the column's size. */
  int equal(const char* anAttrName, const char* aValue, Uint32 len = 0) {
    return rndb_operation_equal(oh(), anAttrName, aValue, len);
  }
  int equal(const char* anAttrName, Int32 v) { return equal(anAttrName, (const char*)&v, 4); }
  int equal(const char* anAttrName, Uint32 v) { return equal(anAttrName, (const char*)&v, 4); }
  int equal(const char* anAttrName, Int64 v) { return equal(anAttrName, (const char*)&v, 8); }
  int equal(const char* anAttrName, Uint64 v) { return equal(anAttrName, (const char*)&v, 8); }
  int equal(Uint32 anAttrId, const char* aValue, Uint32 len = 0) {
    return rndb_operation_equal_id(oh(), anAttrId, aValue, len);
  }
  int equal(Uint32 anAttrId, Int32 v) { return equal(anAttrId, (const char*)&v, 4); }
  int equal(Uint32 anAttrId, Uint32 v) { return equal(anAttrId, (const char*)&v, 4); }
  int equal(Uint32 anAttrId, Int64 v) { return equal(anAttrId, (const char*)&v, 8); }
  int equal(Uint32 anAttrId, Uint64 v) { return equal(anAttrId, (const char*)&v, 8); }

  /* setValue: NULL aValue sets SQL NULL. */
  int setValue(const char* anAttrName, const char* aValue, Uint32 len = 0) {
    return rndb_operation_set_value(oh(), anAttrName, aValue, len);
  }
  int setValue(const char* anAttrName, Int32 v) { return setValue(anAttrName, (const char*)&v, 4); }
  int setValue(const char* anAttrName, Uint32 v) { return setValue(anAttrName, (const char*)&v, 4); }
  int setValue(const char* anAttrName, Int64 v) { return setValue(anAttrName, (const char*)&v, 8); }
  int setValue(const char* anAttrName, Uint64 v) { return setValue(anAttrName, (const char*)&v, 8); }
  int setValue(const char* anAttrName, float v) { return setValue(anAttrName, (const char*)&v, 4); }
  int setValue(const char* anAttrName, double v) { return setValue(anAttrName, (const char*)&v, 8); }
  int setValue(Uint32 anAttrId, const char* aValue, Uint32 len = 0) {
    return rndb_operation_set_value_id(oh(), anAttrId, aValue, len);
  }
  int setValue(Uint32 anAttrId, Int32 v) { return setValue(anAttrId, (const char*)&v, 4); }
  int setValue(Uint32 anAttrId, Uint32 v) { return setValue(anAttrId, (const char*)&v, 4); }
  int setValue(Uint32 anAttrId, Int64 v) { return setValue(anAttrId, (const char*)&v, 8); }
  int setValue(Uint32 anAttrId, Uint64 v) { return setValue(anAttrId, (const char*)&v, 8); }
  int setValue(Uint32 anAttrId, float v) { return setValue(anAttrId, (const char*)&v, 4); }
  int setValue(Uint32 anAttrId, double v) { return setValue(anAttrId, (const char*)&v, 8); }

  /* getValue: the value after execute; also copied to aValue when given. */
  NdbRecAttr* getValue(const char* anAttrName, char* aValue = 0) {
    return reinterpret_cast<NdbRecAttr*>(rndb_operation_get_value(oh(), anAttrName, aValue));
  }
  NdbRecAttr* getValue(Uint32 anAttrId, char* aValue = 0) {
    return reinterpret_cast<NdbRecAttr*>(rndb_operation_get_value_id(oh(), anAttrId, aValue));
  }
  NdbRecAttr* getValue(const NdbDictionary::Column* col, char* aValue = 0) {
    return getValue(col->getName(), aValue);
  }

  const NdbError& getNdbError() const { return rndb_detail::err(rndb_operation_get_error(oh())); }
  const char* getTableName() const { return rndb_operation_get_table_name(oh()); }
  NdbTransaction* getNdbTransaction() const;

 protected:
  NdbOperation();
  ~NdbOperation();
  NdbOperation(const NdbOperation&);
  rndb_operation* oh() const {
    return reinterpret_cast<rndb_operation*>(const_cast<NdbOperation*>(this));
  }
};

/* NdbScanOperation: a full-table scan. */
class NdbScanOperation : public NdbOperation {
 public:
  enum ScanFlag {
    SF_TupScan = (1 << 16),
    SF_DiskScan = (2 << 16),
    SF_OrderBy = (1 << 24),
    SF_OrderByFull = (16 << 24),
    SF_Descending = (2 << 24),
    SF_ReadRangeNo = (4 << 24),
    SF_MultiRange = (8 << 24),
    SF_KeyInfo = 1
  };

  int readTuples(LockMode lock_mode = LM_Read, Uint32 scan_flags = 0, Uint32 parallel = 0,
                 Uint32 batch = 0) {
    return rndb_scan_read_tuples(sh(), (int)lock_mode, scan_flags, parallel, batch);
  }
  /* 0 a row, 1 no more rows, 2 no more cached rows (fetchAllowed false), -1 error. */
  int nextResult(bool fetchAllowed = true, bool forceSend = false) {
    return rndb_scan_next_result(sh(), fetchAllowed ? 1 : 0, forceSend ? 1 : 0);
  }
  void close(bool forceSend = false, bool releaseOp = false) {
    rndb_scan_close(sh(), forceSend ? 1 : 0, releaseOp ? 1 : 0);
  }
  int deleteCurrentTuple() { return rndb_scan_delete_current_tuple(sh()); }
  int deleteCurrentTuple(NdbTransaction*) { return deleteCurrentTuple(); }
  NdbOperation* updateCurrentTuple() {
    return reinterpret_cast<NdbOperation*>(rndb_scan_update_current_tuple(sh()));
  }
  NdbOperation* updateCurrentTuple(NdbTransaction*) { return updateCurrentTuple(); }

 protected:
  NdbScanOperation();
  ~NdbScanOperation();
  rndb_scan* sh() const { return reinterpret_cast<rndb_scan*>(const_cast<NdbScanOperation*>(this)); }
};

/* NdbIndexScanOperation: an ordered-index range scan. */
class NdbIndexScanOperation : public NdbScanOperation {
 public:
  enum BoundType { BoundLE = 0, BoundLT = 1, BoundGE = 2, BoundGT = 3, BoundEQ = 4 };

  /* "value `type` column": BoundLE = inclusive lower bound, BoundGT = strict upper... */
  int setBound(const char* attr, int type, const void* value, Uint32 len = 0) {
    return rndb_scan_set_bound(sh(), attr, type, value, len);
  }
  int setBound(Uint32 anAttrId, int type, const void* value, Uint32 len = 0) {
    return rndb_scan_set_bound_id(sh(), anAttrId, type, value, len);
  }
  bool getSorted() const { return rndb_scan_get_sorted(sh()) == 1; }
  bool getDescending() const { return rndb_scan_get_descending(sh()) == 1; }

 private:
  NdbIndexScanOperation();
  ~NdbIndexScanOperation();
};

/* NdbTransaction. */
class NdbTransaction {
 public:
  enum ExecType { NoExecTypeDef = -1, Prepare = 0, NoCommit = 1, Commit = 2, Rollback = 3 };
  enum CommitStatusType { NotStarted = 0, Started = 1, Committed = 2, Aborted = 3, NeedAbort = 4 };

  NdbOperation* getNdbOperation(const NdbDictionary::Table* aTable) {
    return reinterpret_cast<NdbOperation*>(
        rndb_transaction_get_operation(th(), aTable ? aTable->rndb_handle() : 0));
  }
  NdbOperation* getNdbOperation(const char* aTableName) {
    return reinterpret_cast<NdbOperation*>(rndb_transaction_get_operation_by_name(th(), aTableName));
  }
  NdbScanOperation* getNdbScanOperation(const NdbDictionary::Table* aTable) {
    return reinterpret_cast<NdbScanOperation*>(
        rndb_transaction_get_scan_operation(th(), aTable ? aTable->rndb_handle() : 0));
  }
  NdbIndexScanOperation* getNdbIndexScanOperation(const NdbDictionary::Index* anIndex) {
    return reinterpret_cast<NdbIndexScanOperation*>(
        rndb_transaction_get_index_scan_operation(th(), anIndex ? anIndex->rndb_handle() : 0));
  }
  /* 0 ok, -1 failed: getNdbError(). */
  int execute(ExecType execType,
              NdbOperation::AbortOption abortOption = NdbOperation::DefaultAbortOption,
              int force = 0) {
    return rndb_transaction_execute(th(), (int)execType, (int)abortOption, force);
  }
  /* Nothing runs until Ndb::sendPollNdb, which calls callback(result, this, anyObject). */
  int executeAsynchPrepare(ExecType execType, NdbAsynchCallback callback, void* anyObject,
                           NdbOperation::AbortOption abortOption = NdbOperation::DefaultAbortOption) {
    return rndb_transaction_execute_asynch_prepare(
        th(), (int)execType, reinterpret_cast<rndb_asynch_callback>(callback), anyObject,
        (int)abortOption);
  }
  void executeAsynch(ExecType execType, NdbAsynchCallback callback, void* anyObject,
                     NdbOperation::AbortOption abortOption = NdbOperation::DefaultAbortOption,
                     int forceSend = 0) {
    rndb_transaction_execute_asynch(th(), (int)execType,
                                    reinterpret_cast<rndb_asynch_callback>(callback), anyObject,
                                    (int)abortOption, forceSend);
  }
  /* NdbRecord operations: the key (and values) are read from the rows now; a read
   * writes its result row (values, NULL bits) at execute. */
  const NdbOperation* readTuple(const NdbRecord* key_rec, const char* key_row,
                                const NdbRecord* result_rec, char* result_row,
                                NdbOperation::LockMode lock_mode = NdbOperation::LM_Read,
                                const unsigned char* result_mask = 0,
                                const NdbOperation::OperationOptions* opts = 0,
                                Uint32 sizeOfOptions = 0) {
    (void)opts;
    (void)sizeOfOptions;
    return reinterpret_cast<const NdbOperation*>(rndb_transaction_read_tuple(
        th(), rec(key_rec), key_row, rec(result_rec), result_row, (int)lock_mode, result_mask));
  }
  const NdbOperation* insertTuple(const NdbRecord* key_rec, const char* key_row,
                                  const NdbRecord* attr_rec, const char* attr_row,
                                  const unsigned char* mask = 0,
                                  const NdbOperation::OperationOptions* opts = 0,
                                  Uint32 sizeOfOptions = 0) {
    (void)opts;
    (void)sizeOfOptions;
    return reinterpret_cast<const NdbOperation*>(rndb_transaction_insert_tuple(
        th(), rec(key_rec), key_row, rec(attr_rec), attr_row, mask));
  }
  const NdbOperation* insertTuple(const NdbRecord* combined_rec, const char* combined_row,
                                  const unsigned char* mask = 0,
                                  const NdbOperation::OperationOptions* opts = 0,
                                  Uint32 sizeOfOptions = 0) {
    return insertTuple(0, 0, combined_rec, combined_row, mask, opts, sizeOfOptions);
  }
  const NdbOperation* updateTuple(const NdbRecord* key_rec, const char* key_row,
                                  const NdbRecord* attr_rec, const char* attr_row,
                                  const unsigned char* mask = 0,
                                  const NdbOperation::OperationOptions* opts = 0,
                                  Uint32 sizeOfOptions = 0) {
    (void)opts;
    (void)sizeOfOptions;
    return reinterpret_cast<const NdbOperation*>(rndb_transaction_update_tuple(
        th(), rec(key_rec), key_row, rec(attr_rec), attr_row, mask));
  }
  const NdbOperation* writeTuple(const NdbRecord* key_rec, const char* key_row,
                                 const NdbRecord* attr_rec, const char* attr_row,
                                 const unsigned char* mask = 0,
                                 const NdbOperation::OperationOptions* opts = 0,
                                 Uint32 sizeOfOptions = 0) {
    (void)opts;
    (void)sizeOfOptions;
    return reinterpret_cast<const NdbOperation*>(rndb_transaction_write_tuple(
        th(), rec(key_rec), key_row, rec(attr_rec), attr_row, mask));
  }
  const NdbOperation* deleteTuple(const NdbRecord* key_rec, const char* key_row,
                                  const NdbRecord* result_rec = 0, char* result_row = 0,
                                  const unsigned char* result_mask = 0,
                                  const NdbOperation::OperationOptions* opts = 0,
                                  Uint32 sizeOfOptions = 0) {
    (void)result_rec;
    (void)result_row;
    (void)result_mask;
    (void)opts;
    (void)sizeOfOptions;
    return reinterpret_cast<const NdbOperation*>(
        rndb_transaction_delete_tuple(th(), rec(key_rec), key_row));
  }
  const NdbError& getNdbError() const { return rndb_detail::err(rndb_transaction_get_error(th())); }
  const NdbOperation* getNdbErrorOperation() const {
    return reinterpret_cast<const NdbOperation*>(rndb_transaction_get_error_operation(th()));
  }
  void close() { rndb_transaction_close(th()); }
  Uint64 getTransactionId() { return rndb_transaction_get_transaction_id(th()); }
  CommitStatusType commitStatus() { return (CommitStatusType)rndb_transaction_commit_status(th()); }
  int getGCI(Uint64* gciptr) {
    uint64_t g = 0;
    int r = rndb_transaction_get_gci(th(), &g);
    if (r == 0 && gciptr) *gciptr = g;
    return r;
  }

 private:
  NdbTransaction();
  ~NdbTransaction();
  NdbTransaction(const NdbTransaction&);
  rndb_transaction* th() const {
    return reinterpret_cast<rndb_transaction*>(const_cast<NdbTransaction*>(this));
  }
  static const rndb_record* rec(const NdbRecord* r) { return reinterpret_cast<const rndb_record*>(r); }
};

inline NdbTransaction* NdbOperation::getNdbTransaction() const {
  return reinterpret_cast<NdbTransaction*>(rndb_operation_get_transaction(oh()));
}

/* Ndb: a database handle. One per thread, as in NDB. */
class Ndb {
 public:
  Ndb(Ndb_cluster_connection* conn, const char* aCatalogName = "", const char* aSchemaName = "def")
      : m_h(rndb_ndb_create(conn ? conn->rndb_handle() : 0, aCatalogName)), m_dict(0) {
    (void)aSchemaName;
  }
  ~Ndb() {
    delete m_dict;
    rndb_ndb_free(m_h);
  }

  /* 0 ok, -1 not connected; at most maxNoOfTransactions open at once (4006 beyond). */
  int init(int maxNoOfTransactions = 4) { return rndb_ndb_init(m_h, maxNoOfTransactions); }
  NdbDictionary::Dictionary* getDictionary() const {
    if (!m_dict) {
      rndb_dictionary* d = rndb_ndb_get_dictionary(m_h);
      if (!d) return 0;
      m_dict = new NdbDictionary::Dictionary(d);
    }
    return m_dict;
  }
  /* The table/key hint picks the coordinating node in NDB; no effect here. */
  NdbTransaction* startTransaction(const NdbDictionary::Table* table = 0, const char* keyData = 0,
                                   Uint32 keyLen = 0) {
    if (table)
      return reinterpret_cast<NdbTransaction*>(
          rndb_ndb_start_transaction_hint(m_h, table->rndb_handle(), keyData, keyLen));
    return reinterpret_cast<NdbTransaction*>(rndb_ndb_start_transaction(m_h));
  }
  void closeTransaction(NdbTransaction* trans) {
    rndb_ndb_close_transaction(m_h, reinterpret_cast<rndb_transaction*>(trans));
  }
  const NdbError& getNdbError() const { return rndb_detail::err(rndb_ndb_get_error(m_h)); }
  /* Executes every prepared transaction and runs their callbacks; returns how many. */
  int sendPollNdb(int aMillisecondNumber = 3000, int minNoOfEventsToWakeup = 1, int forceSend = 0) {
    return rndb_ndb_send_poll(m_h, aMillisecondNumber, minNoOfEventsToWakeup, forceSend);
  }
  void sendPreparedTransactions(int forceSend = 0) {
    rndb_ndb_send_prepared_transactions(m_h, forceSend);
  }
  int pollNdb(int aMillisecondNumber = 3000, int minNoOfEventsToWakeup = 1) {
    return rndb_ndb_poll(m_h, aMillisecondNumber, minNoOfEventsToWakeup);
  }
  const char* getDatabaseName() const { return rndb_ndb_get_database_name(m_h); }
  int setDatabaseName(const char* name) { return rndb_ndb_set_database_name(m_h, name); }
  rndb_ndb* rndb_handle() const { return m_h; }

 private:
  Ndb(const Ndb&);
  Ndb& operator=(const Ndb&);
  rndb_ndb* m_h;
  mutable NdbDictionary::Dictionary* m_dict;
};

/* Runs SQL (DDL and the rest of rndb's SQL subset) in the Ndb's database: not an NDB API
 * call (there is no mysqld here). Returns the rows affected or returned by the last
 * statement, -1 on error (ndb.getNdbError()). `output`, if given, receives what the
 * mysql client would print. */
inline int rndb_execute_sql(Ndb& ndb, const char* sql, std::string* output = 0) {
  char* out = 0;
  int r = rndb_execute_sql(ndb.rndb_handle(), sql, output ? &out : 0);
  if (output) *output = out ? out : "";
  rndb_string_free(out);
  return r;
}

#endif /* RNDB_NDBAPI_HPP */
