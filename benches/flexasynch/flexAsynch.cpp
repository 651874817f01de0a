/*
 * flexAsynch.cpp: a flexAsynch-style benchmark (NDB's storage/ndb/test/ndbapi/flexAsynch)
 * against the embedded cluster, through NdbApi.hpp and librndb's C ABI.
 *
 * Table TAB0: COL0 BIGINT UNSIGNED (a 2-word key) + COL1..COL24 Uint32. Each thread has
 * its own Ndb object and runs batches of P parallel transactions (default 32), each
 * with one operation, prepared with executeAsynchPrepare and sent with sendPollNdb;
 * phases insert, read (LM_CommittedRead, values into getValue buffers, checked),
 * update, delete, with all threads starting each phase together. Prints one line per
 * phase: "capi <phase> <threads> <ops/s>", and "capi_cpu <phase> <threads> <ops/s>" with
 * the CPU time of the threads instead of the elapsed time (each thread times its own
 * share from the start barrier; the longest gives the rate).
 *
 * Two ways to define the operations, as flexAsynch has: by default NdbOperation with
 * equal/setValue/getValue per attribute (NdbRecAttr); with -ndbrecord one call per
 * operation from a row buffer (NdbRecord: readTuple/insertTuple/updateTuple/deleteTuple
 * of NdbTransaction), printed as "capi_rec".
 *
 * With -ab (implies -ndbrecord; librndb built with the cargo feature bench-reference):
 * the same-run A/B of the C ABI against the Rust API. Each thread alternates slices
 * through its NdbRecord path ("capi") with slices through the reference functions of
 * capi/src/bench_ref.rs ("rust"), which run exactly the Rust API batches of
 * capi/benches/flexasynch_rust.rs, on the same threads, table and keys, with the same
 * value checks; all threads run the same side at the same time (a barrier between
 * slices), in the order capi, rust, rust, capi, capi, rust... (ABBA: a drift of the
 * machine over the run does not favour either side). A read slice is a pass over the
 * thread's keys; a write phase is cut into slices of its keys. Prints one line per
 * slice: "ab <phase> <threads> <pair> <capi|rust> <ops/s> <ops per CPU-second>"
 * (benches/flexasynch/ab.sh makes the medians and spreads).
 * FLEXASYNCH_AB_PAIRS=n: slice pairs per phase (default 10).
 * FLEXASYNCH_SHOW_SLOTS=1 (with -ab): each thread prints to stderr the registry slots of
 * its transaction objects (bits 40..59 of a handle, capi/src/handle.rs): whether two
 * threads' objects alternate in memory (benches/RESULTS.md, issue 3, tenth pass).
 *
 * Usage: flexAsynch [-t threads] [-p parallel] [-o ops_per_thread] [-c connectstring]
 *                   [-ndbrecord] [-ab]
 * FLEXASYNCH_PHASES=insert,update,... runs only the phases named (default: all), so that
 * the instruction counts of a phase can be compared under callgrind.
 * FLEXASYNCH_READ_PASSES=n reads every key n times in the read phase (default 1): a read
 * phase of one pass lasts tens of milliseconds, too short to time on a shared machine.
 */
#include <NdbApi.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

static const int NATTR = 24;

struct Options {
  int threads = 1;
  int parallel = 32;
  long ops = 200000;
  const char* connectstring = "direct;DataMemory=1G";
  bool ndbrecord = false;
  bool ab = false;
};

/* The reference side of -ab (capi/src/bench_ref.rs): weak, so that this program links
 * against a librndb built without the feature (-ab then refuses to run). */
struct rndb_bench_reference;
extern "C" {
rndb_bench_reference* rndb_bench_reference_create(rndb_ndb* ndb, const rndb_table* table)
    __attribute__((weak));
void rndb_bench_reference_free(rndb_bench_reference* r) __attribute__((weak));
int rndb_bench_reference_read(rndb_bench_reference* r, const uint64_t* keys, size_t n,
                              uint32_t* out, size_t stride_bytes) __attribute__((weak));
int rndb_bench_reference_write(rndb_bench_reference* r, int kind, const uint64_t* keys, size_t n,
                               uint32_t delta) __attribute__((weak));
}

enum Phase { P_INSERT, P_READ, P_UPDATE, P_DELETE, P_END };
static const char* phase_name[] = {"insert", "read", "update", "delete"};

class Barrier {
 public:
  explicit Barrier(int n) : n_(n), waiting_(0), gen_(0) {}
  void wait() {
    std::unique_lock<std::mutex> l(m_);
    int gen = gen_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      gen_++;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return gen != gen_; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, waiting_, gen_;
};

/* The row of an NdbRecord: COL0 at 0, COLa at 8 + 4 * (a - 1). */
struct Row {
  Uint64 key;
  Uint32 attr[NATTR];
};

struct Slot {
  NdbTransaction* tx;
  Uint64 key;
  Uint32 values[NATTR + 1];
  Row row, out;
  int failed;
};

static void callback(int result, NdbTransaction* tx, void* arg) {
  Slot* s = static_cast<Slot*>(arg);
  if (result == -1) {
    const NdbError& e = tx->getNdbError();
    if (s->failed++ == 0) fprintf(stderr, "key %llu: error %d: %s\n", s->key, e.code, e.message);
  }
}

static void fail(const char* what, const NdbError& e) {
  fprintf(stderr, "%s: error %d: %s\n", what, e.code, e.message);
  exit(1);
}

/* CPU time of the calling thread, in seconds. */
static double thread_cpu_secs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool phase_selected(int p) {
  const char* list = getenv("FLEXASYNCH_PHASES");
  if (list == NULL) return true;
  std::string l = std::string(",") + list + ",";
  return l.find(std::string(",") + phase_name[p] + ",") != std::string::npos;
}

/* Passes of the read phase over the keys (FLEXASYNCH_READ_PASSES). */
static int read_passes() {
  const char* v = getenv("FLEXASYNCH_READ_PASSES");
  int n = v ? atoi(v) : 1;
  return n < 1 ? 1 : n;
}

static Uint32 value_of(Uint64 key, int attr, int delta) {
  return (Uint32)key + (Uint32)attr + (Uint32)delta;
}

/* One thread's share of a phase: `ops` single-operation transactions in batches. */
/* Defines the operation of slot `s` with an NdbRecord. */
static void define_record(NdbTransaction* tx, const NdbRecord* rec, Phase phase, Slot& s) {
  s.row.key = s.key;
  const NdbOperation* op = NULL;
  switch (phase) {
    case P_INSERT:
    case P_UPDATE: {
      int delta = phase == P_INSERT ? 0 : 1;
      for (int a = 1; a <= NATTR; a++) s.row.attr[a - 1] = value_of(s.key, a, delta);
      op = phase == P_INSERT ? tx->insertTuple(rec, (const char*)&s.row)
                             : tx->updateTuple(rec, (const char*)&s.row, rec, (const char*)&s.row);
      break;
    }
    case P_READ:
      op = tx->readTuple(rec, (const char*)&s.row, rec, (char*)&s.out,
                         NdbOperation::LM_CommittedRead);
      break;
    default:
      op = tx->deleteTuple(rec, (const char*)&s.row);
      break;
  }
  if (op == NULL) fail("NdbRecord operation", tx->getNdbError());
}

/* Checks the values read into the slots' result rows (NdbRecord, and the reference). */
static long check_rows(std::vector<Slot>& slots, int n, const Uint32* (*where)(Slot&)) {
  long errors = 0;
  for (int j = 0; j < n; j++) {
    Slot& s = slots[j];
    if (s.failed) continue;
    const Uint32* got = where(s);
    for (int a = 1; a <= NATTR; a++)
      if (got[a - 1] != value_of(s.key, a, 0)) {
        if (errors++ == 0)
          fprintf(stderr, "key %llu COL%d: read %u, expected %u\n", s.key, a, got[a - 1],
                  value_of(s.key, a, 0));
        break;
      }
  }
  return errors;
}

static const Uint32* record_out(Slot& s) { return s.out.attr; }

/* One thread's share of a phase through the reference functions (-ab): the keys
 * first .. first + ops - 1 of the thread, in batches of `parallel`, the read values
 * checked as the NdbRecord path checks them. */
static long run_reference(rndb_bench_reference* ref, Phase phase, int thread, long first, long ops,
                          int parallel, std::vector<Slot>& slots, std::vector<uint64_t>& keys) {
  long errors = 0;
  for (long i = 0; i < ops; i += parallel) {
    int n = (int)std::min<long>(parallel, ops - i);
    for (int j = 0; j < n; j++) {
      Slot& s = slots[j];
      s.key = ((Uint64)thread << 32) | (Uint64)(first + i + j);
      s.failed = 0;
      keys[j] = s.key;
    }
    int done;
    if (phase == P_READ) {
      done = rndb_bench_reference_read(ref, keys.data(), n, slots[0].out.attr, sizeof(Slot));
      if (done >= 0 && done == n) errors += check_rows(slots, n, record_out);
    } else {
      int kind = phase == P_INSERT ? 0 : phase == P_UPDATE ? 1 : 2;
      done = rndb_bench_reference_write(ref, kind, keys.data(), n, phase == P_UPDATE ? 1 : 0);
    }
    if (done < 0) fail("reference", rndb_detail::err(rndb_last_error()));
    errors += n - done;
  }
  return errors;
}

static long run_phase(Ndb& ndb, const NdbDictionary::Table* tab, const NdbRecord* rec, Phase phase,
                      int thread, long first, long ops, int parallel, std::vector<Slot>& slots) {
  long errors = 0;
  for (long i = 0; i < ops; i += parallel) {
    int n = (int)std::min<long>(parallel, ops - i);
    for (int j = 0; j < n; j++) {
      Slot& s = slots[j];
      s.key = ((Uint64)thread << 32) | (Uint64)(first + i + j);
      s.failed = 0;
      s.tx = ndb.startTransaction();
      if (s.tx == NULL) fail("startTransaction", ndb.getNdbError());
      if (rec != NULL) {
        define_record(s.tx, rec, phase, s);
        if (s.tx->executeAsynchPrepare(NdbTransaction::Commit, &callback, &s) != 0)
          fail("executeAsynchPrepare", s.tx->getNdbError());
        continue;
      }
      NdbOperation* op = s.tx->getNdbOperation(tab);
      if (op == NULL) fail("getNdbOperation", s.tx->getNdbError());
      switch (phase) {
        case P_INSERT:
        case P_UPDATE: {
          int delta = phase == P_INSERT ? 0 : 1;
          if (phase == P_INSERT)
            op->insertTuple();
          else
            op->updateTuple();
          op->equal((Uint32)0, (const char*)&s.key);
          for (int a = 1; a <= NATTR; a++) {
            s.values[a] = value_of(s.key, a, delta);
            op->setValue((Uint32)a, (const char*)&s.values[a]);
          }
          break;
        }
        case P_READ:
          op->readTuple(NdbOperation::LM_CommittedRead);
          op->equal((Uint32)0, (const char*)&s.key);
          for (int a = 1; a <= NATTR; a++) op->getValue((Uint32)a, (char*)&s.values[a]);
          break;
        default:
          op->deleteTuple();
          op->equal((Uint32)0, (const char*)&s.key);
          break;
      }
      if (s.tx->executeAsynchPrepare(NdbTransaction::Commit, &callback, &s) != 0)
        fail("executeAsynchPrepare", s.tx->getNdbError());
    }
    int done = ndb.sendPollNdb(3000, n, 0);
    while (done < n) {
      int more = ndb.pollNdb(3000, n - done);
      if (more <= 0) fail("pollNdb", ndb.getNdbError());
      done += more;
    }
    for (int j = 0; j < n; j++) {
      Slot& s = slots[j];
      errors += s.failed != 0;
      if (phase == P_READ && !s.failed) {
        /* Checked where the values landed: the result row (NdbRecord) or the getValue
         * buffers. */
        const Uint32* got = rec != NULL ? s.out.attr : &s.values[1];
        for (int a = 1; a <= NATTR; a++)
          if (got[a - 1] != value_of(s.key, a, 0)) {
            if (errors++ == 0)
              fprintf(stderr, "key %llu COL%d: read %u, expected %u\n", s.key, a, got[a - 1],
                      value_of(s.key, a, 0));
            break;
          }
      }
      ndb.closeTransaction(s.tx);
    }
  }
  return errors;
}

static void create_table(Ndb& ndb) {
  NdbDictionary::Dictionary* dict = ndb.getDictionary();
  NdbDictionary::Table tab("TAB0");
  NdbDictionary::Column key("COL0");
  key.setType(NdbDictionary::Column::Bigunsigned);
  key.setPrimaryKey(true);
  tab.addColumn(key);
  for (int a = 1; a <= NATTR; a++) {
    char name[16];
    snprintf(name, sizeof name, "COL%d", a);
    NdbDictionary::Column c(name);
    c.setType(NdbDictionary::Column::Unsigned);
    c.setNullable(false);
    tab.addColumn(c);
  }
  if (dict->createTable(tab) != 0) fail("createTable", dict->getNdbError());
}

/* The NdbRecord of TAB0 over `Row`. */
static const NdbRecord* make_record(NdbDictionary::Dictionary* dict,
                                    const NdbDictionary::Table* tab) {
  NdbDictionary::RecordSpecification spec[NATTR + 1];
  for (int a = 0; a <= NATTR; a++) {
    spec[a].column = tab->getColumn(a);
    spec[a].offset = a == 0 ? 0 : (Uint32)(8 + 4 * (a - 1));
    spec[a].nullbit_byte_offset = 0;
    spec[a].nullbit_bit_in_byte = 0;
    spec[a].column_flags = 0;
  }
  const NdbRecord* rec = dict->createRecord(tab, spec, NATTR + 1, sizeof(spec[0]));
  if (rec == NULL) fail("createRecord", dict->getNdbError());
  return rec;
}

/* Slice pairs per phase of -ab (FLEXASYNCH_AB_PAIRS). */
static int ab_pairs() {
  const char* v = getenv("FLEXASYNCH_AB_PAIRS");
  int n = v ? atoi(v) : 10;
  return n < 1 ? 1 : n;
}

/* -ab (see the notes at the top): returns the number of failed operations. */
static long run_ab(const Options& o, Ndb_cluster_connection& conn) {
  if (rndb_bench_reference_create == NULL || rndb_bench_reference_read == NULL ||
      rndb_bench_reference_write == NULL || rndb_bench_reference_free == NULL) {
    fprintf(stderr, "-ab needs librndb built with: cargo build --release -p rndb-capi "
                    "--features bench-reference\n");
    exit(2);
  }
  const int slices = 2 * ab_pairs(), nt = o.threads;
  /* Write phases: slice s has keys s * chunk .. (s + 1) * chunk - 1; read slices are
   * passes over every key. */
  const long chunk = (o.ops + slices - 1) / slices;
  std::vector<long> slice_ops(P_END * slices);
  for (int p = 0; p < P_END; p++)
    for (int sl = 0; sl < slices; sl++)
      slice_ops[p * slices + sl] =
          p == P_READ ? o.ops : std::max<long>(0, std::min<long>(chunk, o.ops - sl * chunk));
  /* capi, rust, rust, capi, capi, rust, ...: slice sl goes to the reference when
   * sl % 4 is 1 or 2; pair k is slices 2k and 2k + 1. */
  auto reference = [](int sl) { return sl % 4 == 1 || sl % 4 == 2; };
  Barrier slice_start(nt);
  std::vector<double> secs(P_END * slices * nt, 0.0), cpu(P_END * slices * nt, 0.0);
  std::vector<long> errors(nt, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < nt; t++) {
    workers.emplace_back([&, t] {
      Ndb ndb(&conn, "TEST_DB");
      if (ndb.init(1024) != 0) fail("init", ndb.getNdbError());
      NdbDictionary::Dictionary* dict = ndb.getDictionary();
      const NdbDictionary::Table* tab = dict->getTable("TAB0");
      if (tab == NULL) fail("getTable", dict->getNdbError());
      const NdbRecord* rec = make_record(dict, tab);
      rndb_bench_reference* ref =
          rndb_bench_reference_create(ndb.rndb_handle(), tab->rndb_handle());
      if (ref == NULL) fail("rndb_bench_reference_create", rndb_detail::err(rndb_last_error()));
      std::vector<Slot> slots(o.parallel);
      std::vector<uint64_t> keys(o.parallel);
      for (int p = 0; p < P_END; p++) {
        if (!phase_selected(p)) continue;
        for (int sl = 0; sl < slices; sl++) {
          long n = slice_ops[p * slices + sl];
          long first = p == P_READ ? 0 : sl * chunk;
          slice_start.wait();
          std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
          double c0 = thread_cpu_secs();
          if (reference(sl))
            errors[t] += run_reference(ref, (Phase)p, t, first, n, o.parallel, slots, keys);
          else
            errors[t] += run_phase(ndb, tab, rec, (Phase)p, t, first, n, o.parallel, slots);
          size_t at = ((size_t)p * slices + sl) * nt + t;
          cpu[at] = thread_cpu_secs() - c0;
          secs[at] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
      }
      if (getenv("FLEXASYNCH_SHOW_SLOTS")) {
        static std::mutex show;
        std::lock_guard<std::mutex> g(show);
        fprintf(stderr, "thread %d transaction slots:", t);
        for (int j = 0; j < o.parallel; j++)
          fprintf(stderr, " %llu",
                  (unsigned long long)(((uint64_t)(uintptr_t)slots[j].tx->rndb_handle() >> 40) &
                                       0xFFFFF));
        fprintf(stderr, "\n");
      }
      rndb_bench_reference_free(ref);
    });
  }
  for (size_t t = 0; t < workers.size(); t++) workers[t].join();
  for (int p = 0; p < P_END; p++) {
    if (!phase_selected(p)) continue;
    for (int sl = 0; sl < slices; sl++) {
      double longest = 0, longest_cpu = 0;
      for (int t = 0; t < nt; t++) {
        size_t at = ((size_t)p * slices + sl) * nt + t;
        longest = std::max(longest, secs[at]);
        longest_cpu = std::max(longest_cpu, cpu[at]);
      }
      double ops = (double)nt * slice_ops[p * slices + sl];
      if (ops == 0 || longest <= 0 || longest_cpu <= 0) continue;
      printf("ab %s %d %d %s %.0f %.0f\n", phase_name[p], nt, sl / 2,
             reference(sl) ? "rust" : "capi", ops / longest, ops / longest_cpu);
    }
  }
  fflush(stdout);
  long total = 0;
  for (int t = 0; t < nt; t++) total += errors[t];
  return total;
}

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-ndbrecord")) {
      o.ndbrecord = true;
      continue;
    }
    if (!strcmp(a, "-ab")) {
      o.ab = o.ndbrecord = true;
      continue;
    }
    if (v == NULL) {
      fprintf(stderr, "usage: %s [-t threads] [-p parallel] [-o ops] [-c connectstring] [-ndbrecord] [-ab]\n",
              argv[0]);
      return 2;
    }
    i++;
    if (!strcmp(a, "-t"))
      o.threads = atoi(v);
    else if (!strcmp(a, "-p"))
      o.parallel = atoi(v);
    else if (!strcmp(a, "-o"))
      o.ops = atol(v);
    else if (!strcmp(a, "-c"))
      o.connectstring = v;
    else {
      fprintf(stderr, "unknown option %s\n", a);
      return 2;
    }
  }
  ndb_init();
  long total_errors = 0;
  {
    Ndb_cluster_connection conn(o.connectstring);
    if (conn.connect(12, 5, 1) != 0 || conn.wait_until_ready(30, 0) < 0) {
      fprintf(stderr, "connect: %s\n", conn.get_latest_error_msg());
      return 1;
    }
    {
      Ndb ndb(&conn, "TEST_DB");
      if (ndb.init(1024) != 0) fail("init", ndb.getNdbError());
      create_table(ndb);
    }
    if (o.ab) {
      total_errors = run_ab(o, conn);
    } else {
      Barrier start(o.threads + 1), end(o.threads + 1);
      std::vector<long> errors(o.threads, 0);
      /* Each thread's time for the current phase, measured by the thread from the start
       * barrier to the end of its share (as the Rust program measures: the wake-ups at
       * the barriers are not part of the phase). */
      std::vector<double> secs(o.threads, 0.0);
      /* The same in CPU time of the thread (less sensitive to other load on the machine). */
      std::vector<double> cpu(o.threads, 0.0);
      std::vector<std::thread> workers;
      for (int t = 0; t < o.threads; t++) {
        workers.emplace_back([&, t] {
          Ndb ndb(&conn, "TEST_DB");
          if (ndb.init(1024) != 0) fail("init", ndb.getNdbError());
          NdbDictionary::Dictionary* dict = ndb.getDictionary();
          const NdbDictionary::Table* tab = dict->getTable("TAB0");
          if (tab == NULL) fail("getTable", dict->getNdbError());
          const NdbRecord* rec = o.ndbrecord ? make_record(dict, tab) : NULL;
          std::vector<Slot> slots(o.parallel);
          for (int p = 0; p < P_END; p++) {
            if (!phase_selected(p)) continue;
            start.wait();
            std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
            double c0 = thread_cpu_secs();
            for (int pass = 0; pass < (p == P_READ ? read_passes() : 1); pass++)
              errors[t] += run_phase(ndb, tab, rec, (Phase)p, t, 0, o.ops, o.parallel, slots);
            cpu[t] = thread_cpu_secs() - c0;
            secs[t] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            end.wait();
          }
        });
      }
      for (int p = 0; p < P_END; p++) {
        if (!phase_selected(p)) continue;
        start.wait();
        end.wait();
        double longest = 0, longest_cpu = 0;
        for (int t = 0; t < o.threads; t++) {
          longest = std::max(longest, secs[t]);
          longest_cpu = std::max(longest_cpu, cpu[t]);
        }
        const char* who = o.ndbrecord ? "capi_rec" : "capi";
        double ops = (double)o.threads * o.ops * (p == P_READ ? read_passes() : 1);
        printf("%s %s %d %.0f\n", who, phase_name[p], o.threads, ops / longest);
        printf("%s_cpu %s %d %.0f\n", who, phase_name[p], o.threads, ops / longest_cpu);
        fflush(stdout);
      }
      for (size_t t = 0; t < workers.size(); t++) workers[t].join();
      for (int t = 0; t < o.threads; t++) total_errors += errors[t];
    }
  }
  ndb_end(0);
  if (total_errors) {
    fprintf(stderr, "%ld transactions failed\n", total_errors);
    return 1;
  }
  return 0;
}
