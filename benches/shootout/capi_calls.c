/* The shootout's reads through librndb's C ABI, as a C application makes them (the
 * NDB API's NdbRecord calls: capi/examples/ndbapi_record.cpp), so that Python pays one
 * call into C per read or per batch, as it does for LMDB's `txn.get` (a C extension),
 * instead of one ctypes call per NDB API call. Compiled by cffi's API mode at the first
 * use (benches/shootout/capi.py, `fast_calls`), against include/rndb.h and librndb.so.
 *
 * Rows are the adapter's kv record (capi.py's notes): the key at offset 0, the value's
 * 2-byte length at `len_at`. Errors: the NdbError's code, and its message copied into
 * the context (NUL-terminated, cut to fit), since the transaction that holds it is
 * closed before the call returns. */

#include <string.h>

#define TUPLE_NOT_FOUND 626

static void keep_error(const rndb_error *e, int *code, char *msg, size_t msg_len) {
  *code = e ? e->code : -1;
  if (msg_len == 0) return;
  const char *m = (e && e->message) ? e->message : "no error object";
  strncpy(msg, m, msg_len - 1);
  msg[msg_len - 1] = '\0';
}

/* What a client's reads keep between calls (one per adapter, filled once by capi.py):
 * Python passes one pointer per call instead of the eight values. */
struct shootout_ctx {
  struct rndb_ndb *ndb;
  const struct rndb_record *rec;
  char *row;          /* the single read's row */
  size_t len_at;      /* the value's 2-byte length in a row */
  char *rows;         /* a batch's rows, `stride` bytes apart */
  size_t stride;
  const struct rndb_operation **ops; /* room for a batch's operations */
  int code;           /* the last error's code and message */
  char msg[256];
};

/* A committed read of `key` into ctx->row (the key written at its offset 0 first):
 * startTransaction, readTuple(rec, row, rec, row, LM_CommittedRead), execute(Commit),
 * closeTransaction. Returns the value's length (>= 0); -1: no row with that key (626);
 * -2: an error (ctx->code, ctx->msg). */
int shootout_read(struct shootout_ctx *c, long long key) {
  memcpy(c->row, &key, sizeof key);
  struct rndb_transaction *tx = rndb_ndb_start_transaction(c->ndb);
  if (!tx) {
    keep_error(rndb_ndb_get_error(c->ndb), &c->code, c->msg, sizeof c->msg);
    return -2;
  }
  if (!rndb_transaction_read_tuple(tx, c->rec, c->row, c->rec, c->row, RNDB_LM_COMMITTED_READ,
                                   NULL) ||
      rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_ABORT_ON_ERROR, 0) != 0) {
    keep_error(rndb_transaction_get_error(tx), &c->code, c->msg, sizeof c->msg);
    rndb_ndb_close_transaction(c->ndb, tx);
    return c->code == TUPLE_NOT_FOUND ? -1 : -2;
  }
  if (rndb_ndb_close_transaction(c->ndb, tx) != 0) {
    keep_error(rndb_ndb_get_error(c->ndb), &c->code, c->msg, sizeof c->msg);
    return -2;
  }
  unsigned short len;
  memcpy(&len, c->row + c->len_at, sizeof len);
  return len;
}

/* Committed reads of `n` rows in one transaction (readTuple per row, one
 * execute(Commit, AO_IgnoreError)): row i at `ctx->rows + i * ctx->stride`, its key in
 * place, its value's length set to 0xFFFF beforehand by the caller (left so when there
 * is no row); ctx->ops has room for `n` operations. Returns how many rows were found,
 * -1 on an error (a row's other than 626). */
int shootout_read_batch(struct shootout_ctx *c, int n) {
  struct rndb_transaction *tx = rndb_ndb_start_transaction(c->ndb);
  if (!tx) {
    keep_error(rndb_ndb_get_error(c->ndb), &c->code, c->msg, sizeof c->msg);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    char *row = c->rows + (size_t)i * c->stride;
    c->ops[i] = rndb_transaction_read_tuple(tx, c->rec, row, c->rec, row, RNDB_LM_COMMITTED_READ,
                                            NULL);
    if (!c->ops[i]) {
      keep_error(rndb_transaction_get_error(tx), &c->code, c->msg, sizeof c->msg);
      rndb_ndb_close_transaction(c->ndb, tx);
      return -1;
    }
  }
  if (rndb_transaction_execute(tx, RNDB_COMMIT, RNDB_AO_IGNORE_ERROR, 0) != 0) {
    keep_error(rndb_transaction_get_error(tx), &c->code, c->msg, sizeof c->msg);
    rndb_ndb_close_transaction(c->ndb, tx);
    return -1;
  }
  int found = 0;
  for (int i = 0; i < n; i++) {
    unsigned short len;
    memcpy(&len, c->rows + (size_t)i * c->stride + c->len_at, sizeof len);
    if (len != 0xFFFF) {
      found++;
      continue;
    }
    /* Not written: the operation's error must be 626 (no such row), not another. */
    const rndb_error *e = rndb_operation_get_error(c->ops[i]);
    if (!e || e->code != TUPLE_NOT_FOUND) {
      keep_error(e, &c->code, c->msg, sizeof c->msg);
      rndb_ndb_close_transaction(c->ndb, tx);
      return -1;
    }
  }
  if (rndb_ndb_close_transaction(c->ndb, tx) != 0) {
    keep_error(rndb_ndb_get_error(c->ndb), &c->code, c->msg, sizeof c->msg);
    return -1;
  }
  return found;
}
