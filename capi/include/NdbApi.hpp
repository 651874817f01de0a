/*
 * NdbApi.hpp: MySQL Cluster's NDB API (C++) over librndb's C ABI (rndb.h), header-only.
 *
 * An NDB API program ports by changing its include to this file and its connectstring
 * to "embedded" (or "embedded;datadir=PATH;config=PATH;Parameter=value"), which starts
 * the cluster inside the process ("local", with the same parts, starts it as distributed
 * nodes in the process: rndb_mgmd's and rndbd's code over an in-process network). Class names, method signatures and enum values are
 * NDB's (NdbDictionary::Column::Int == 7, NdbOperation::LM_CommittedRead == 2,
 * NdbTransaction::Commit == 2, NdbIndexScanOperation::BoundLE == 0 ...).
 *
 * Build: g++ app.cpp $(pkg-config --cflags --libs rndb)
 *
 * Objects the application makes (Ndb_cluster_connection, Ndb, NdbDictionary::Table,
 * Column, Index) are C++ objects holding an rndb handle. Objects the API hands out by
 * pointer are C++ objects too, each holding its rndb handle, and owned as in NDB: an
 * NdbTransaction by the Ndb that started it (reused after closeTransaction, freed by
 * ~Ndb); NdbOperation, NdbScanOperation, NdbIndexScanOperation and NdbRecAttr by their
 * transaction (valid until closeTransaction); NdbRecord by its Dictionary (until
 * releaseRecord). Asynchronous callbacks go through an extern "C" trampoline.
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
#include <vector>

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
 public:
  const rndb_record* rndb_handle() const { return m_h; }

 private:
  friend class NdbDictionary;
  friend class NdbTransaction;
  explicit NdbRecord(const rndb_record* h) : m_h(h) {}
  ~NdbRecord() {}
  NdbRecord(const NdbRecord&);
  NdbRecord& operator=(const NdbRecord&);
  const rndb_record* m_h;
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
      if (!rec) return 0;
      NdbRecord* r = new NdbRecord(rec);
      m_records.push_back(r);
      return r;
    }
    void releaseRecord(NdbRecord* rec) {
      for (size_t i = 0; i < m_records.size(); i++) {
        if (m_records[i] == rec) {
          rndb_dict_release_record(m_h, rec->m_h);
          m_records.erase(m_records.begin() + (std::ptrdiff_t)i);
          delete rec;
          return;
        }
      }
      /* Not a record of this dictionary: the C ABI reports the error. */
      rndb_dict_release_record(m_h, rec ? rec->m_h : 0);
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
      for (size_t i = 0; i < m_records.size(); i++) delete m_records[i];
    }

   private:
    friend class ::Ndb;
    explicit Dictionary(rndb_dictionary* h) : m_h(h) {}
    Dictionary(const Dictionary&);
    Dictionary& operator=(const Dictionary&);
    rndb_dictionary* m_h;
    mutable std::map<const rndb_table*, Table*> m_tables;
    mutable std::map<const rndb_index*, Index*> m_indexes;
    /* The NdbRecord objects made by createRecord, freed by releaseRecord or here. */
    std::vector<NdbRecord*> m_records;
  };
};

/* Ndb_cluster_connection: "embedded" (or "local") starts the cluster in this process. */
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
  /* rndb extension: blocks until the commit with this GCI (NdbTransaction::getGCI) is
     on disk on every data node; 0, or -1 after timeout_ms (error 4008). */
  int wait_durable(Uint64 gci, unsigned timeout_ms = 60000) {
    return rndb_cluster_connection_wait_durable(m_h, gci, timeout_ms);
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

/* NdbRecAttr: a value read by getValue, defined after execute / nextResult. Owned by
 * its transaction (valid until closeTransaction). */
class NdbRecAttr {
 public:
  int isNULL() const { return rndb_rec_attr_is_null(m_h); }
  Uint32 u_32_value() const { return rndb_rec_attr_u32(m_h); }
  Int32 int32_value() const { return rndb_rec_attr_int32(m_h); }
  Uint32 u_medium_value() const { return rndb_rec_attr_u32(m_h); }
  Int32 medium_value() const { return rndb_rec_attr_int32(m_h); }
  Uint64 u_64_value() const { return rndb_rec_attr_u64(m_h); }
  Int64 int64_value() const { return rndb_rec_attr_int64(m_h); }
  Uint16 u_short_value() const { return rndb_rec_attr_u16(m_h); }
  short short_value() const { return rndb_rec_attr_int16(m_h); }
  Uint8 u_8_value() const { return rndb_rec_attr_u8(m_h); }
  Int8 int8_value() const { return rndb_rec_attr_int8(m_h); }
  char u_char_value() const { return (char)rndb_rec_attr_u8(m_h); }
  char char_value() const { return (char)rndb_rec_attr_int8(m_h); }
  float float_value() const { return rndb_rec_attr_float(m_h); }
  double double_value() const { return rndb_rec_attr_double(m_h); }
  char* aRef() const { return const_cast<char*>(rndb_rec_attr_aref(m_h)); }
  Uint32 get_size_in_bytes() const { return rndb_rec_attr_get_size_in_bytes(m_h); }
  const rndb_rec_attr* rndb_handle() const { return m_h; }

 private:
  friend class NdbTransaction;
  NdbRecAttr() : m_h(0) {}
  ~NdbRecAttr() {}
  NdbRecAttr(const NdbRecAttr&);
  NdbRecAttr& operator=(const NdbRecAttr&);
  rndb_rec_attr* m_h;
};

/* NdbOperation: a primary-key operation of a transaction. Owned by its transaction
 * (valid until closeTransaction). */
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

  int readTuple(LockMode lm = LM_Read) { return rndb_operation_read_tuple(m_oh, (int)lm); }
  int readTupleExclusive() { return readTuple(LM_Exclusive); }
  int simpleRead() { return readTuple(LM_SimpleRead); }
  int dirtyRead() { return readTuple(LM_CommittedRead); }
  int committedRead() { return readTuple(LM_CommittedRead); }
  int insertTuple() { return rndb_operation_insert_tuple(m_oh); }
  int updateTuple() { return rndb_operation_update_tuple(m_oh); }
  int writeTuple() { return rndb_operation_write_tuple(m_oh); }
  int deleteTuple() { return rndb_operation_delete_tuple(m_oh); }

  /* equal: a primary-key column's value in NDB's format; len 0 = the column's size. */
  int equal(const char* anAttrName, const char* aValue, Uint32 len = 0) {
    return rndb_operation_equal(m_oh, anAttrName, aValue, len);
  }
  int equal(const char* anAttrName, Int32 v) { return equal(anAttrName, (const char*)&v, 4); }
  int equal(const char* anAttrName, Uint32 v) { return equal(anAttrName, (const char*)&v, 4); }
  int equal(const char* anAttrName, Int64 v) { return equal(anAttrName, (const char*)&v, 8); }
  int equal(const char* anAttrName, Uint64 v) { return equal(anAttrName, (const char*)&v, 8); }
  int equal(Uint32 anAttrId, const char* aValue, Uint32 len = 0) {
    return rndb_operation_equal_id(m_oh, anAttrId, aValue, len);
  }
  int equal(Uint32 anAttrId, Int32 v) { return equal(anAttrId, (const char*)&v, 4); }
  int equal(Uint32 anAttrId, Uint32 v) { return equal(anAttrId, (const char*)&v, 4); }
  int equal(Uint32 anAttrId, Int64 v) { return equal(anAttrId, (const char*)&v, 8); }
  int equal(Uint32 anAttrId, Uint64 v) { return equal(anAttrId, (const char*)&v, 8); }

  /* setValue: NULL aValue sets SQL NULL. */
  int setValue(const char* anAttrName, const char* aValue, Uint32 len = 0) {
    return rndb_operation_set_value(m_oh, anAttrName, aValue, len);
  }
  int setValue(const char* anAttrName, Int32 v) { return setValue(anAttrName, (const char*)&v, 4); }
  int setValue(const char* anAttrName, Uint32 v) { return setValue(anAttrName, (const char*)&v, 4); }
  int setValue(const char* anAttrName, Int64 v) { return setValue(anAttrName, (const char*)&v, 8); }
  int setValue(const char* anAttrName, Uint64 v) { return setValue(anAttrName, (const char*)&v, 8); }
  int setValue(const char* anAttrName, float v) { return setValue(anAttrName, (const char*)&v, 4); }
  int setValue(const char* anAttrName, double v) { return setValue(anAttrName, (const char*)&v, 8); }
  int setValue(Uint32 anAttrId, const char* aValue, Uint32 len = 0) {
    return rndb_operation_set_value_id(m_oh, anAttrId, aValue, len);
  }
  int setValue(Uint32 anAttrId, Int32 v) { return setValue(anAttrId, (const char*)&v, 4); }
  int setValue(Uint32 anAttrId, Uint32 v) { return setValue(anAttrId, (const char*)&v, 4); }
  int setValue(Uint32 anAttrId, Int64 v) { return setValue(anAttrId, (const char*)&v, 8); }
  int setValue(Uint32 anAttrId, Uint64 v) { return setValue(anAttrId, (const char*)&v, 8); }
  int setValue(Uint32 anAttrId, float v) { return setValue(anAttrId, (const char*)&v, 4); }
  int setValue(Uint32 anAttrId, double v) { return setValue(anAttrId, (const char*)&v, 8); }

  /* getValue: the value after execute; also copied to aValue when given. */
  NdbRecAttr* getValue(const char* anAttrName, char* aValue = 0);
  NdbRecAttr* getValue(Uint32 anAttrId, char* aValue = 0);
  NdbRecAttr* getValue(const NdbDictionary::Column* col, char* aValue = 0) {
    return getValue(col->getName(), aValue);
  }

  const NdbError& getNdbError() const { return rndb_detail::err(rndb_operation_get_error(m_oh)); }
  const char* getTableName() const { return rndb_operation_get_table_name(m_oh); }
  NdbTransaction* getNdbTransaction() const { return m_trans; }
  const rndb_operation* rndb_handle() const { return m_oh; }

 protected:
  friend class NdbTransaction;
  NdbOperation() : m_oh(0), m_trans(0) {}
  ~NdbOperation() {}
  NdbOperation(const NdbOperation&);
  NdbOperation& operator=(const NdbOperation&);
  rndb_operation* m_oh;
  NdbTransaction* m_trans;
};

/* NdbScanOperation: a full-table scan. Owned by its transaction. */
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
    return rndb_scan_read_tuples(m_sh, (int)lock_mode, scan_flags, parallel, batch);
  }
  /* 0 a row, 1 no more rows, 2 no more cached rows (fetchAllowed false), -1 error. */
  int nextResult(bool fetchAllowed = true, bool forceSend = false) {
    return rndb_scan_next_result(m_sh, fetchAllowed ? 1 : 0, forceSend ? 1 : 0);
  }
  void close(bool forceSend = false, bool releaseOp = false) {
    rndb_scan_close(m_sh, forceSend ? 1 : 0, releaseOp ? 1 : 0);
  }
  int deleteCurrentTuple() { return rndb_scan_delete_current_tuple(m_sh); }
  int deleteCurrentTuple(NdbTransaction*) { return deleteCurrentTuple(); }
  NdbOperation* updateCurrentTuple();
  NdbOperation* updateCurrentTuple(NdbTransaction*) { return updateCurrentTuple(); }

 protected:
  friend class NdbTransaction;
  NdbScanOperation() : m_sh(0) {}
  ~NdbScanOperation() {}
  rndb_scan* m_sh;
};

/* NdbIndexScanOperation: an ordered-index range scan. */
class NdbIndexScanOperation : public NdbScanOperation {
 public:
  enum BoundType { BoundLE = 0, BoundLT = 1, BoundGE = 2, BoundGT = 3, BoundEQ = 4 };

  /* "value `type` column": BoundLE = inclusive lower bound, BoundGT = strict upper... */
  int setBound(const char* attr, int type, const void* value, Uint32 len = 0) {
    return rndb_scan_set_bound(m_sh, attr, type, value, len);
  }
  int setBound(Uint32 anAttrId, int type, const void* value, Uint32 len = 0) {
    return rndb_scan_set_bound_id(m_sh, anAttrId, type, value, len);
  }
  bool getSorted() const { return rndb_scan_get_sorted(m_sh) == 1; }
  bool getDescending() const { return rndb_scan_get_descending(m_sh) == 1; }

 private:
  friend class NdbTransaction;
  NdbIndexScanOperation() {}
  ~NdbIndexScanOperation() {}
};

namespace rndb_detail {
/* What executeAsynchPrepare hands the C ABI as the callback's argument. */
struct AsynchContext {
  NdbAsynchCallback callback;
  void* anyObject;
  NdbTransaction* trans;
};
}  // namespace rndb_detail

/* The C callback of every asynchronous execute: calls the application's callback with
 * the C++ transaction. */
extern "C" {
static inline void rndb_ndbapi_asynch_trampoline(int result, rndb_transaction* tx, void* arg) {
  (void)tx;
  rndb_detail::AsynchContext* c = static_cast<rndb_detail::AsynchContext*>(arg);
  if (c && c->callback) c->callback(result, c->trans, c->anyObject);
}
}

/* NdbTransaction: made by Ndb::startTransaction and owned by the Ndb; valid until
 * closeTransaction. It owns its operations, scan operations and rec attrs (recycled
 * with it). */
class NdbTransaction {
 public:
  enum ExecType { NoExecTypeDef = -1, Prepare = 0, NoCommit = 1, Commit = 2, Rollback = 3 };
  enum CommitStatusType { NotStarted = 0, Started = 1, Committed = 2, Aborted = 3, NeedAbort = 4 };

  NdbOperation* getNdbOperation(const NdbDictionary::Table* aTable) {
    return op(rndb_transaction_get_operation(m_h, aTable ? aTable->rndb_handle() : 0));
  }
  NdbOperation* getNdbOperation(const char* aTableName) {
    return op(rndb_transaction_get_operation_by_name(m_h, aTableName));
  }
  NdbScanOperation* getNdbScanOperation(const NdbDictionary::Table* aTable) {
    return scan(rndb_transaction_get_scan_operation(m_h, aTable ? aTable->rndb_handle() : 0));
  }
  NdbIndexScanOperation* getNdbIndexScanOperation(const NdbDictionary::Index* anIndex) {
    return scan(
        rndb_transaction_get_index_scan_operation(m_h, anIndex ? anIndex->rndb_handle() : 0));
  }
  /* 0 ok, -1 failed: getNdbError(). */
  int execute(ExecType execType,
              NdbOperation::AbortOption abortOption = NdbOperation::DefaultAbortOption,
              int force = 0) {
    return rndb_transaction_execute(m_h, (int)execType, (int)abortOption, force);
  }
  /* Nothing runs until Ndb::sendPollNdb, which calls callback(result, this, anyObject). */
  int executeAsynchPrepare(ExecType execType, NdbAsynchCallback callback, void* anyObject,
                           NdbOperation::AbortOption abortOption = NdbOperation::DefaultAbortOption) {
    m_asynch.callback = callback;
    m_asynch.anyObject = anyObject;
    return rndb_transaction_execute_asynch_prepare(m_h, (int)execType,
                                                   &rndb_ndbapi_asynch_trampoline, &m_asynch,
                                                   (int)abortOption);
  }
  void executeAsynch(ExecType execType, NdbAsynchCallback callback, void* anyObject,
                     NdbOperation::AbortOption abortOption = NdbOperation::DefaultAbortOption,
                     int forceSend = 0) {
    m_asynch.callback = callback;
    m_asynch.anyObject = anyObject;
    rndb_transaction_execute_asynch(m_h, (int)execType, &rndb_ndbapi_asynch_trampoline, &m_asynch,
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
    return op(rndb_transaction_read_tuple(m_h, rec(key_rec), key_row, rec(result_rec), result_row,
                                          (int)lock_mode, result_mask));
  }
  const NdbOperation* insertTuple(const NdbRecord* key_rec, const char* key_row,
                                  const NdbRecord* attr_rec, const char* attr_row,
                                  const unsigned char* mask = 0,
                                  const NdbOperation::OperationOptions* opts = 0,
                                  Uint32 sizeOfOptions = 0) {
    (void)opts;
    (void)sizeOfOptions;
    return op(rndb_transaction_insert_tuple(m_h, rec(key_rec), key_row, rec(attr_rec), attr_row,
                                            mask));
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
    return op(rndb_transaction_update_tuple(m_h, rec(key_rec), key_row, rec(attr_rec), attr_row,
                                            mask));
  }
  const NdbOperation* writeTuple(const NdbRecord* key_rec, const char* key_row,
                                 const NdbRecord* attr_rec, const char* attr_row,
                                 const unsigned char* mask = 0,
                                 const NdbOperation::OperationOptions* opts = 0,
                                 Uint32 sizeOfOptions = 0) {
    (void)opts;
    (void)sizeOfOptions;
    return op(rndb_transaction_write_tuple(m_h, rec(key_rec), key_row, rec(attr_rec), attr_row,
                                           mask));
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
    return op(rndb_transaction_delete_tuple(m_h, rec(key_rec), key_row));
  }
  const NdbError& getNdbError() const { return rndb_detail::err(rndb_transaction_get_error(m_h)); }
  /* The operation that failed, or NULL. */
  const NdbOperation* getNdbErrorOperation() const {
    const void* e = rndb_transaction_get_error_operation(m_h);
    if (!e) return 0;
    for (size_t i = 0; i < m_nops; i++)
      if (static_cast<const void*>(opAt(i)->m_oh) == e) return opAt(i);
    for (size_t i = 0; i < m_nscans; i++)
      if (static_cast<const void*>(m_scans[i]->m_oh) == e ||
          static_cast<const void*>(m_scans[i]->m_sh) == e)
        return m_scans[i];
    return 0;
  }
  /* Closes the transaction, as Ndb::closeTransaction(this). */
  void close();
  Uint64 getTransactionId() { return rndb_transaction_get_transaction_id(m_h); }
  CommitStatusType commitStatus() { return (CommitStatusType)rndb_transaction_commit_status(m_h); }
  int getGCI(Uint64* gciptr) {
    uint64_t g = 0;
    int r = rndb_transaction_get_gci(m_h, &g);
    if (r == 0 && gciptr) *gciptr = g;
    return r;
  }
  rndb_transaction* rndb_handle() const { return m_h; }

 private:
  friend class Ndb;
  friend class NdbOperation;
  friend class NdbScanOperation;
  explicit NdbTransaction(Ndb* ndb)
      : m_h(0), m_ndb(ndb), m_open(false), m_nops(0), m_nscans(0), m_nras(0) {
    m_asynch.callback = 0;
    m_asynch.anyObject = 0;
    m_asynch.trans = this;
    m_op0.m_trans = this;
  }
  ~NdbTransaction() {
    for (size_t i = 0; i < m_ops.size(); i++) delete m_ops[i];
    for (size_t i = 0; i < m_scans.size(); i++) delete m_scans[i];
    for (size_t i = 0; i < m_ras.size(); i++) delete m_ras[i];
  }
  NdbTransaction(const NdbTransaction&);
  NdbTransaction& operator=(const NdbTransaction&);

  /* Starts using this object for transaction `h`. */
  void attach(rndb_transaction* h) {
    m_h = h;
    m_open = true;
    m_nops = m_nscans = m_nras = 0;
    m_asynch.callback = 0;
    m_asynch.anyObject = 0;
  }
  /* The C++ operation of a C operation handle (NULL stays NULL). The first operation
   * is a member (one transaction, one operation is the common case); the others are
   * m_ops[i - 1]. */
  NdbOperation* op(rndb_operation* h) {
    if (!h) return 0;
    NdbOperation* o;
    if (m_nops == 0) {
      o = &m_op0;
    } else {
      if (m_nops - 1 == m_ops.size()) m_ops.push_back(new NdbOperation());
      o = m_ops[m_nops - 1];
      o->m_trans = this;
    }
    m_nops++;
    o->m_oh = h;
    return o;
  }
  NdbOperation* opAt(size_t i) const { return i == 0 ? const_cast<NdbOperation*>(&m_op0) : m_ops[i - 1]; }
  /* NdbRecord operations come back as const handles; the object is the same. */
  const NdbOperation* op(const rndb_operation* h) { return op(const_cast<rndb_operation*>(h)); }
  NdbIndexScanOperation* scan(rndb_scan* h) {
    if (!h) return 0;
    if (m_nscans == m_scans.size()) m_scans.push_back(new NdbIndexScanOperation());
    NdbIndexScanOperation* s = m_scans[m_nscans++];
    s->m_sh = h;
    s->m_oh = rndb_scan_as_operation(h);
    s->m_trans = this;
    return s;
  }
  NdbRecAttr* recAttr(rndb_rec_attr* h) {
    if (!h) return 0;
    if (m_nras == m_ras.size()) m_ras.push_back(new NdbRecAttr());
    NdbRecAttr* r = m_ras[m_nras++];
    r->m_h = h;
    return r;
  }
  static const rndb_record* rec(const NdbRecord* r) { return r ? r->m_h : 0; }

  /* What every transaction uses first (two cache lines), then the rest. */
  rndb_transaction* m_h;
  Ndb* m_ndb;
  bool m_open;
  size_t m_nops, m_nscans, m_nras;
  rndb_detail::AsynchContext m_asynch;
  NdbOperation m_op0;
  std::vector<NdbOperation*> m_ops;
  std::vector<NdbIndexScanOperation*> m_scans;
  std::vector<NdbRecAttr*> m_ras;
};

inline NdbRecAttr* NdbOperation::getValue(const char* anAttrName, char* aValue) {
  return m_trans->recAttr(rndb_operation_get_value(m_oh, anAttrName, aValue));
}
inline NdbRecAttr* NdbOperation::getValue(Uint32 anAttrId, char* aValue) {
  return m_trans->recAttr(rndb_operation_get_value_id(m_oh, anAttrId, aValue));
}
inline NdbOperation* NdbScanOperation::updateCurrentTuple() {
  return m_trans->op(rndb_scan_update_current_tuple(m_sh));
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
    for (size_t i = 0; i < m_txs.size(); i++) delete m_txs[i];
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
    rndb_transaction* h =
        table ? rndb_ndb_start_transaction_hint(m_h, table->rndb_handle(), keyData, keyLen)
              : rndb_ndb_start_transaction(m_h);
    if (!h) return 0;
    NdbTransaction* t;
    if (m_free.empty()) {
      m_txs.push_back(0);
      t = new NdbTransaction(this);
      m_txs.back() = t;
    } else {
      t = m_free.back();
      m_free.pop_back();
    }
    t->attach(h);
    return t;
  }
  /* Rolls back the transaction if open; the transaction and its operations, scans and
   * rec attrs must not be used afterwards. */
  void closeTransaction(NdbTransaction* trans) {
    if (!trans || trans->m_ndb != this || !trans->m_open) {
      /* Not an open transaction of this Ndb: the C ABI reports the error. */
      rndb_ndb_close_transaction(m_h, trans ? trans->m_h : 0);
      return;
    }
    rndb_ndb_close_transaction(m_h, trans->m_h);
    trans->m_open = false;
    m_free.push_back(trans);
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
  /* Every NdbTransaction object made (freed by ~Ndb), and those closed, for reuse. */
  std::vector<NdbTransaction*> m_txs;
  std::vector<NdbTransaction*> m_free;
};

inline void NdbTransaction::close() {
  if (m_open)
    m_ndb->closeTransaction(this);
  else
    rndb_transaction_close(m_h);
}

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
