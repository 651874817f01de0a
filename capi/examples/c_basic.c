/*
 * c_basic.c: the C ABI from plain C (rndb.h): connect to the embedded cluster, create
 * a table with SQL, insert rows with primary-key operations, read one back, scan the
 * table, show the table with SQL, insert into a table without a primary key (NDB's
 * hidden key, given by the data nodes), and free everything.
 */
#include "rndb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char* what, const rndb_error* e) {
  printf("%s failed: error %d: %s\n", what, e->code, e->message);
  exit(1);
}

/* VARCHAR(32) utf8mb4 holds up to 128 bytes: one length byte, then the bytes. */
static void varchar(char* buf, const char* s) {
  buf[0] = (char)strlen(s);
  memcpy(buf + 1, s, strlen(s));
}

int main(int argc, char** argv) {
  rndb_init();
  rndb_cluster_connection* conn = rndb_cluster_connection_create(argc > 1 ? argv[1] : "embedded");
  if (rndb_cluster_connection_connect(conn, 4, 5, 1) != 0)
    die("connect", rndb_cluster_connection_get_error(conn));
  printf("connected: %d data nodes\n", rndb_cluster_connection_no_db_nodes(conn));

  rndb_ndb* ndb = rndb_ndb_create(conn, "c_example");
  if (rndb_ndb_init(ndb, 16) != 0) die("init", rndb_ndb_get_error(ndb));

  char* out = NULL;
  if (rndb_execute_sql(ndb,
                       "CREATE TABLE fruit (id INT UNSIGNED NOT NULL PRIMARY KEY, "
                       "name VARCHAR(32) NOT NULL, price DOUBLE, stock BIGINT)",
                       &out) < 0)
    die("CREATE TABLE", rndb_ndb_get_error(ndb));
  printf("%s\n", out);
  rndb_string_free(out);

  rndb_dictionary* dict = rndb_ndb_get_dictionary(ndb);
  const rndb_table* t = rndb_dict_get_table(dict, "fruit");
  if (t == NULL) die("getTable", rndb_dict_get_error(dict));
  printf("table %s: %d columns, key %s\n", rndb_table_get_name(t), rndb_table_get_no_of_columns(t),
         rndb_table_get_primary_key(t, 0));
  for (int i = 0; i < rndb_table_get_no_of_columns(t); i++) {
    const rndb_column* c = rndb_table_get_column(t, i);
    printf("  %d %s type=%d length=%d size=%d nullable=%d\n", rndb_column_get_column_no(c),
           rndb_column_get_name(c), rndb_column_get_type(c), rndb_column_get_length(c),
           rndb_column_get_size_in_bytes(c), rndb_column_get_nullable(c));
  }

  const char* names[] = {"apple", "banana", "cherry", "dürian"};
  rndb_transaction* tx = rndb_ndb_start_transaction(ndb);
  for (uint32_t i = 0; i < 4; i++) {
    rndb_operation* op = rndb_transaction_get_operation(tx, t);
    char name[129];
    double price = 0.5 * (i + 1);
    int64_t stock = 1000 * (int64_t)i - 1;
    varchar(name, names[i]);
    rndb_operation_insert_tuple(op);
    rndb_operation_equal(op, "id", &i, sizeof i);
    rndb_operation_set_value(op, "name", name, 0);
    rndb_operation_set_value(op, "price", i == 2 ? NULL : &price, sizeof price);
    rndb_operation_set_value(op, "stock", &stock, sizeof stock);
  }
  if (rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) != 0)
    die("insert", rndb_transaction_get_error(tx));
  /* The commit on disk on every data node (embedded, or rndbd over TCP). */
  uint64_t gci = 0;
  if (rndb_transaction_get_gci(tx, &gci) != 0 || gci == 0)
    die("get_gci", rndb_transaction_get_error(tx));
  if (rndb_cluster_connection_wait_durable(conn, gci, 20000) != 0)
    die("wait_durable", rndb_cluster_connection_get_error(conn));
  printf("insert durable\n");
  rndb_ndb_close_transaction(ndb, tx);

  tx = rndb_ndb_start_transaction(ndb);
  rndb_operation* op = rndb_transaction_get_operation(tx, t);
  uint32_t key = 3;
  rndb_operation_read_tuple(op, RNDB_LM_COMMITTED_READ);
  rndb_operation_equal(op, "id", &key, 0);
  rndb_rec_attr* name = rndb_operation_get_value(op, "name", NULL);
  rndb_rec_attr* price = rndb_operation_get_value(op, "price", NULL);
  rndb_rec_attr* stock = rndb_operation_get_value_id(op, 3, NULL);
  if (rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) != 0)
    die("read", rndb_transaction_get_error(tx));
  const char* n = rndb_rec_attr_aref(name);
  printf("id 3: name=%.*s (%u bytes with prefix) price=%.2f stock=%lld\n", (int)(unsigned char)n[0],
         n + 1, rndb_rec_attr_get_size_in_bytes(name), rndb_rec_attr_double(price),
         (long long)rndb_rec_attr_int64(stock));
  rndb_ndb_close_transaction(ndb, tx);

  tx = rndb_ndb_start_transaction(ndb);
  rndb_scan* scan = rndb_transaction_get_scan_operation(tx, t);
  rndb_scan_read_tuples(scan, RNDB_LM_COMMITTED_READ, 0, 0, 0);
  rndb_rec_attr* sid = rndb_operation_get_value(rndb_scan_as_operation(scan), "id", NULL);
  rndb_rec_attr* sprice = rndb_operation_get_value(rndb_scan_as_operation(scan), "price", NULL);
  if (rndb_transaction_execute(tx, RNDB_NO_COMMIT, RNDB_ABORT_ON_ERROR, 0) != 0)
    die("scan", rndb_transaction_get_error(tx));
  int rows = 0, nulls = 0;
  uint32_t idsum = 0;
  while (rndb_scan_next_result(scan, 1, 0) == 0) {
    rows++;
    idsum += rndb_rec_attr_u32(sid);
    nulls += rndb_rec_attr_is_null(sprice) == 1;
  }
  printf("scan: %d rows, sum of ids %u, %d NULL prices\n", rows, idsum, nulls);
  rndb_ndb_close_transaction(ndb, tx);

  if (rndb_execute_sql(ndb, "SELECT id, name, price, stock FROM fruit ORDER BY id", &out) < 0)
    die("SELECT", rndb_ndb_get_error(ndb));
  printf("%s\n", out);
  rndb_string_free(out);

  /* The Ndb object's SQL session keeps a transaction: ROLLBACK undoes, COMMIT applies. */
  const char* txn[] = {
      "BEGIN", "UPDATE fruit SET stock = stock - 1 WHERE id = 1",
      "DELETE FROM fruit WHERE id = 0", "SELECT COUNT(*) AS n, SUM(stock) AS stock FROM fruit",
      "ROLLBACK", "START TRANSACTION", "UPDATE fruit SET stock = 0 WHERE stock > 2000",
      "COMMIT", "SELECT id, stock FROM fruit ORDER BY id",
  };
  for (size_t i = 0; i < sizeof txn / sizeof txn[0]; i++) {
    int n = rndb_execute_sql(ndb, txn[i], &out);
    if (n < 0) die(txn[i], rndb_ndb_get_error(ndb));
    printf("%s -> %d\n%s\n", txn[i], n, out);
    rndb_string_free(out);
  }

  /* A table without a primary key: an insert names no key, the hidden one is given. */
  if (rndb_execute_sql(ndb, "CREATE TABLE event_log (what VARCHAR(32) NOT NULL, at BIGINT)",
                       &out) < 0)
    die("CREATE TABLE event_log", rndb_ndb_get_error(ndb));
  rndb_string_free(out);
  const rndb_table* log = rndb_dict_get_table(dict, "event_log");
  if (log == NULL) die("getTable event_log", rndb_dict_get_error(dict));
  tx = rndb_ndb_start_transaction(ndb);
  for (int64_t i = 0; i < 3; i++) {
    rndb_operation* ins = rndb_transaction_get_operation(tx, log);
    char what[129];
    varchar(what, i == 1 ? "restock" : "sale");
    rndb_operation_insert_tuple(ins);
    rndb_operation_set_value(ins, "what", what, 0);
    rndb_operation_set_value(ins, "at", &i, sizeof i);
  }
  if (rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) != 0)
    die("insert into event_log", rndb_transaction_get_error(tx));
  rndb_ndb_close_transaction(ndb, tx);
  if (rndb_execute_sql(ndb, "INSERT INTO event_log VALUES ('sale', 3)", &out) < 0)
    die("INSERT INTO event_log", rndb_ndb_get_error(ndb));
  rndb_string_free(out);
  if (rndb_execute_sql(ndb, "SELECT what, COUNT(*) AS n, SUM(at) AS at FROM event_log GROUP BY what ORDER BY what",
                       &out) < 0)
    die("SELECT event_log", rndb_ndb_get_error(ndb));
  printf("%s\n", out);
  rndb_string_free(out);

  rndb_ndb_free(ndb);
  rndb_cluster_connection_free(conn);
  rndb_end(0);
  return 0;
}
