/*
 * c_bad_input.c: what a new user gets wrong, through the C ABI. Each case must return
 * -1 or NULL with an error that names the problem, and the process keeps running:
 * NULL handles, a handle of the wrong type or garbage, handles used after close or
 * free, getValue on an unknown column, equal with a value of the wrong size, execute
 * twice after Commit, nextResult after the scan ended and after close, a management
 * server connectstring. The test suite also runs this program under valgrind.
 */
#include "rndb.h"

#include <stdio.h>
#include <stdlib.h>

static int cases = 0;

static void report(const char* what, long long rc, const rndb_error* e) {
  cases++;
  printf("%-44s rc=%lld code=%d status=%d class=%d: %s\n", what, rc, e->code, (int)e->status,
         (int)e->classification, e->message);
}

#define CHECK(cond)                                         \
  if (!(cond)) {                                            \
    printf("UNEXPECTED at line %d: %s\n", __LINE__, #cond); \
    exit(1);                                                \
  }

int main(void) {
  /* NULL handles. */
  CHECK(rndb_ndb_start_transaction(NULL) == NULL);
  report("start_transaction(NULL ndb)", 0, rndb_last_error());
  CHECK(rndb_transaction_execute(NULL, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) == -1);
  report("execute(NULL tx)", -1, rndb_last_error());
  CHECK(rndb_rec_attr_is_null(NULL) == -1);
  report("rec_attr_is_null(NULL)", -1, rndb_last_error());
  report("transaction_get_error(NULL)", 0, rndb_transaction_get_error(NULL));
  CHECK(rndb_dict_get_table(NULL, "t") == NULL);
  report("dict_get_table(NULL dict)", 0, rndb_last_error());

  /* A management server that is not there (nothing listens on port 1). */
  rndb_cluster_connection* remote = rndb_cluster_connection_create("127.0.0.1:1");
  CHECK(rndb_cluster_connection_connect(remote, 0, 0, 0) == -1);
  report("connect(\"127.0.0.1:1\")", -1, rndb_cluster_connection_get_error(remote));
  rndb_cluster_connection_free(remote);

  rndb_cluster_connection* conn = rndb_cluster_connection_create("embedded");
  CHECK(rndb_cluster_connection_connect(conn, 0, 0, 0) == 0);
  rndb_ndb* ndb = rndb_ndb_create(conn, "bad");
  CHECK(rndb_ndb_init(ndb, 8) == 0);
  CHECK(rndb_execute_sql(ndb, "CREATE TABLE t (id INT UNSIGNED NOT NULL PRIMARY KEY, v INT)",
                         NULL) == 0);
  CHECK(rndb_execute_sql(ndb, "CREATE TABLEE x", NULL) == -1);
  report("execute_sql(syntax error)", -1, rndb_ndb_get_error(ndb));
  rndb_dictionary* dict = rndb_ndb_get_dictionary(ndb);
  const rndb_table* t = rndb_dict_get_table(dict, "t");
  CHECK(t != NULL);
  CHECK(rndb_dict_get_table(dict, "no_such_table") == NULL);
  report("dict_get_table(\"no_such_table\")", 0, rndb_dict_get_error(dict));

  /* A handle of the wrong type, and garbage. */
  CHECK(rndb_transaction_execute((rndb_transaction*)t, RNDB_COMMIT, 0, 0) == -1);
  report("execute(table handle as tx)", -1, rndb_last_error());
  CHECK(rndb_transaction_execute((rndb_transaction*)0x1234, RNDB_COMMIT, 0, 0) == -1);
  report("execute(garbage pointer)", -1, rndb_last_error());
  CHECK(rndb_table_free((rndb_table*)t) == -1);
  report("table_free(dictionary table)", -1, rndb_last_error());

  /* getValue on an unknown column: NULL, 4004; the transaction then fails. */
  rndb_transaction* tx = rndb_ndb_start_transaction(ndb);
  rndb_operation* op = rndb_transaction_get_operation(tx, t);
  uint32_t key = 1;
  CHECK(rndb_operation_read_tuple(op, RNDB_LM_READ) == 0);
  CHECK(rndb_operation_equal(op, "id", &key, 4) == 0);
  CHECK(rndb_operation_get_value(op, "nope", NULL) == NULL);
  report("get_value(\"nope\")", 0, rndb_operation_get_error(op));
  CHECK(rndb_operation_get_value_id(op, 99, NULL) == NULL);
  report("get_value_id(99)", 0, rndb_last_error());
  CHECK(rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) == -1);
  report("execute after the failed getValue", -1, rndb_transaction_get_error(tx));
  rndb_ndb_close_transaction(ndb, tx);

  /* equal with a value of the wrong size: 4209. */
  tx = rndb_ndb_start_transaction(ndb);
  op = rndb_transaction_get_operation(tx, t);
  uint64_t key64 = 1;
  CHECK(rndb_operation_insert_tuple(op) == 0);
  CHECK(rndb_operation_equal(op, "id", &key64, sizeof key64) == -1);
  report("equal(INT UNSIGNED, 8 bytes)", -1, rndb_operation_get_error(op));
  CHECK(rndb_operation_equal(op, "v", &key, 4) == -1);
  report("equal(non-key column)", -1, rndb_last_error());
  CHECK(rndb_operation_set_value(op, "id", NULL, 0) == -1);
  report("set_value(key column, NULL)", -1, rndb_last_error());
  rndb_ndb_close_transaction(ndb, tx);

  /* execute twice after Commit: 4604. */
  tx = rndb_ndb_start_transaction(ndb);
  op = rndb_transaction_get_operation(tx, t);
  int32_t v = -5;
  rndb_operation_insert_tuple(op);
  rndb_operation_equal(op, "id", &key, 0);
  rndb_operation_set_value(op, "v", &v, 0);
  CHECK(rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) == 0);
  CHECK(rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) == -1);
  report("execute(Commit) twice", -1, rndb_transaction_get_error(tx));
  CHECK(rndb_transaction_get_operation(tx, t) == NULL);
  report("get_operation after Commit", 0, rndb_transaction_get_error(tx));
  CHECK(rndb_transaction_execute(tx, 7, RNDB_ABORT_ON_ERROR, 0) == -1);
  report("execute(exec type 7)", -1, rndb_last_error());

  /* Handles used after close. */
  rndb_ndb_close_transaction(ndb, tx);
  CHECK(rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) == -1);
  report("execute(closed tx)", -1, rndb_last_error());
  CHECK(rndb_operation_equal(op, "id", &key, 4) == -1);
  report("equal(operation of a closed tx)", -1, rndb_last_error());
  CHECK(rndb_ndb_close_transaction(ndb, tx) == -1);
  report("close_transaction twice", -1, rndb_last_error());

  /* A duplicate key, and a read of a missing row. */
  tx = rndb_ndb_start_transaction(ndb);
  op = rndb_transaction_get_operation(tx, t);
  rndb_operation_insert_tuple(op);
  rndb_operation_equal(op, "id", &key, 0);
  CHECK(rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) == -1);
  report("insert(existing key)", -1, rndb_transaction_get_error(tx));
  rndb_ndb_close_transaction(ndb, tx);
  tx = rndb_ndb_start_transaction(ndb);
  op = rndb_transaction_get_operation(tx, t);
  uint32_t missing = 42;
  rndb_operation_read_tuple(op, RNDB_LM_COMMITTED_READ);
  rndb_operation_equal(op, "id", &missing, 0);
  rndb_rec_attr* ra = rndb_operation_get_value(op, "v", NULL);
  CHECK(rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) == -1);
  report("read(missing row)", -1, rndb_transaction_get_error(tx));
  CHECK(rndb_rec_attr_is_null(ra) == -1);
  rndb_ndb_close_transaction(ndb, tx);
  CHECK(rndb_rec_attr_u32(ra) == 0);
  report("rec_attr of a closed tx", 0, rndb_last_error());

  /* nextResult after the end (1 again), and after close (-1, 4120). */
  tx = rndb_ndb_start_transaction(ndb);
  rndb_scan* scan = rndb_transaction_get_scan_operation(tx, t);
  rndb_scan_read_tuples(scan, RNDB_LM_COMMITTED_READ, 0, 0, 0);
  CHECK(rndb_transaction_execute(tx, RNDB_NO_COMMIT, RNDB_ABORT_ON_ERROR, 0) == 0);
  int rows = 0, rc;
  while ((rc = rndb_scan_next_result(scan, 1, 0)) == 0) rows++;
  CHECK(rows == 1 && rc == 1);
  rc = rndb_scan_next_result(scan, 1, 0);
  CHECK(rc == 1);
  report("next_result after the end (1 again)", rc,
         rndb_operation_get_error(rndb_scan_as_operation(scan)));
  rndb_scan_close(scan, 0, 0);
  CHECK(rndb_scan_next_result(scan, 1, 0) == -1);
  report("next_result after close", -1, rndb_last_error());
  rndb_ndb_close_transaction(ndb, tx);

  /* nextResult before execute: 4200; setBound on a table scan: 4514. */
  tx = rndb_ndb_start_transaction(ndb);
  scan = rndb_transaction_get_scan_operation(tx, t);
  CHECK(rndb_scan_next_result(scan, 1, 0) == -1);
  report("next_result before execute", -1, rndb_last_error());
  rndb_scan_read_tuples(scan, RNDB_LM_COMMITTED_READ, 0, 0, 0);
  CHECK(rndb_scan_set_bound(scan, "id", RNDB_BOUND_EQ, &key, 0) == -1);
  report("set_bound on a table scan", -1, rndb_last_error());
  rndb_ndb_close_transaction(ndb, tx);

  /* An Ndb used after free; a connection freed twice. */
  CHECK(rndb_ndb_free(ndb) == 0);
  CHECK(rndb_ndb_start_transaction(ndb) == NULL);
  report("start_transaction(freed ndb)", 0, rndb_last_error());
  CHECK(rndb_cluster_connection_free(conn) == 0);
  CHECK(rndb_cluster_connection_free(conn) == -1);
  report("connection_free twice", -1, rndb_last_error());

  printf("%d cases, all refused cleanly\n", cases);
  rndb_end(0);
  return 0;
}
